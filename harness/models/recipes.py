"""How each quantization tool makes a checkpoint, through its public API, as a user would.

A `Recipe` is one (tool, preset) pair: the call that turns a float checkpoint folder into a
quantized one, and the harness scheme the result is, so each layer can be held to that
scheme's reference. The table `RECIPES` is explicit; nothing is inferred from names. The
tools are imported inside the functions that call them: the harness does not depend on them.

llm-compressor: ``oneshot(model=..., recipe=QuantizationModifier(...))`` on the model loaded
from the float folder (``oneshot`` reads the config from ``name_or_path``), then
``save_pretrained(..., save_compressed=True)`` (compressed-tensors format). Static presets
are calibrated on seeded synthetic token batches (`calibration_tokens`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from harness.models.tiny import TinyModel, seed_of

CALIBRATION_SAMPLES = 16
CALIBRATION_LENGTH = 32


@dataclass(frozen=True)
class Recipe:
    """One tool preset: what it is called, the harness scheme it makes, how to run it."""

    tool: str  # distribution name of the tool
    preset: str  # the tool's own name for the scheme
    scheme: str  # the harness scheme (harness.core.schemes) the checkpoint holds
    static: bool  # calibrated (static activation scales)
    make: Callable[[TinyModel, Recipe, Path, Path], None]

    @property
    def name(self) -> str:
        return f"{self.tool}:{self.preset}"


def tool_version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


def calibration_tokens(model: TinyModel) -> list[list[int]]:
    """Seeded synthetic token batches for static scales (ids 3 .. vocab-1)."""
    gen = torch.Generator().manual_seed(seed_of(model.name, "calibration"))
    vocab = int(model.config["vocab_size"])
    ids = torch.randint(3, vocab, (CALIBRATION_SAMPLES, CALIBRATION_LENGTH), generator=gen)
    return [[int(t) for t in row] for row in ids]


def word_level_tokenizer(model: TinyModel) -> Any:
    """A tokenizer with one word per id ("t<id>"), made locally (no hub): ``oneshot`` wants a
    processor whenever a dataset is given, though the dataset here is already token ids."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(int(model.config["vocab_size"]))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t0"))
    return PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="t0", pad_token="t0", bos_token="t1", eos_token="t2"
    )


def _llmcompressor(model: TinyModel, recipe: Recipe, src: Path, dst: Path) -> None:
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    net = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.bfloat16)
    ignore = ["lm_head", *(f"re:.*{suffix}$" for suffix in model.keep_float)]
    modifier = QuantizationModifier(targets="Linear", scheme=recipe.preset, ignore=ignore)
    kwargs: dict[str, Any] = {}
    if recipe.static:
        from datasets import Dataset

        tokens = calibration_tokens(model)
        kwargs = {
            "dataset": Dataset.from_dict(
                {"input_ids": tokens, "attention_mask": [[1] * len(t) for t in tokens]}
            ),
            "processor": word_level_tokenizer(model),
            "num_calibration_samples": len(tokens),
            "max_seq_length": CALIBRATION_LENGTH,
        }
    oneshot(model=net, recipe=modifier, **kwargs)
    net.save_pretrained(dst, save_compressed=True)


LLMC = "llmcompressor"
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(LLMC, "FP8_DYNAMIC", "fp8_per_channel", False, _llmcompressor),
        Recipe(LLMC, "FP8", "fp8_per_tensor", True, _llmcompressor),
        Recipe(LLMC, "FP8_BLOCK", "fp8_per_block", False, _llmcompressor),
    )
}
