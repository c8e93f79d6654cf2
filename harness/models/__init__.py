"""Model level: tiny models from configs, checkpoints made by the quantization tools and
cached by content hash, their files read as harness checkpoints, per-layer checks of what an
engine captured, the emulated forward and logit comparisons, and weight memory
(docs/MODELS.md). The tools and ``transformers`` are imported only where they are called."""
