"""Model level: tiny models from configs, checkpoints made by the quantization tools and
cached by content hash, their files read as harness checkpoints, per-layer checks of what an
engine captured, the emulated forward and logit comparisons, and weight memory
(docs/MODELS.md). The tools and ``transformers`` are imported only where they are called.

Modules, each with its one job:

- ``tiny``: Tiny models as Hugging Face configs (dense Llama, with and without biases; a
  Mixtral MoE), every parameter seeded by sha256(model, parameter name); seeded prompts; the
  vLLM modules that must be quantized.
- ``recipes``, ``cache``, ``make``: Each tool preset (llm-compressor, AMD Quark) as a
  `Recipe` (its public API call and the harness scheme it makes); checkpoint folders made
  once and kept by content hash, built in the tool's own venv (`QHARNESS_TOOL_PYTHON`) when
  the tool is not importable here.
- ``selection``: Which layers a recipe leaves in the model dtype (ignore lists by shard or
  fused-module name, targets by regex) and what each vLLM layer must then be: quantized,
  float, or refused (a fused layer whose shards disagree).
- ``files``: A compressed-tensors or Quark folder read as the loading suite's
  `LinearCheckpoint`s, fused as vLLM fuses them; its config mapped to a harness scheme by an
  explicit table per format (`quant_method`).
- ``mx_files``, ``moe_files``: File checks the FP8 validators do not cover: packed NVFP4 /
  MX layouts (codes, group scales, global scales, codes against the float weight), and a MoE
  block's experts (complete, own scales, router unquantized).
- ``layers``, ``evaluate``: Per-layer checks of an engine's capture: runtime tensors against
  the files, each output against the harness reference for its exact input within the path's
  derived bound (bit-exact where unique), SQNR floor; one `ModelRun` per checkpoint per
  process.
- ``cases``: `ModelCase`, the model suite's case (model, tool preset, layer or block) and
  the record fields its report section groups by.
- ``forward``, ``memory``: The emulated forward (float64, dequantized weights,
  harness-quantized inputs) and logit SQNR / top-1 agreement; weight bytes against what the
  quantized tensors must take.
"""
