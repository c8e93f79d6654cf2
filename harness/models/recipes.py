"""How each quantization tool makes a checkpoint, through its public API, as a user would.

A `Recipe` is one (tool, preset) pair: the call that turns a float checkpoint folder into a
quantized one, and the harness scheme the result is, so each layer can be held to that
scheme's reference. The table `RECIPES` is explicit; nothing is inferred from names. The
tools are imported inside the functions that call them: the harness does not depend on them.

AMD Quark: ``LLMTemplate.get(model_type).get_config(scheme=...)``, ``ModelQuantizer(config)
.quantize_model(model, calibration batches)``, ``export_safetensors`` (Quark format).

llm-compressor: ``oneshot(model=..., recipe=QuantizationModifier(...))`` on the model loaded
from the float folder (``oneshot`` reads the config from ``name_or_path``), then
``save_pretrained(..., save_compressed=True)`` (compressed-tensors format). Static presets
are calibrated on seeded synthetic token batches (`calibration_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch

from harness.models.selection import SELECTIONS, Selection, name_fused_modules
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
    # which layers it quantizes (harness.models.selection); None: every Linear but lm_head
    selection: Selection | None = None

    @property
    def label(self) -> str:
        """The preset, and the layer selection where there is one."""
        return self.preset + (f"+{self.selection.name}" if self.selection else "")

    @property
    def name(self) -> str:
        return f"{self.tool}:{self.label}"


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
    selection = recipe.selection
    targets: str | list[str] = "Linear"
    if selection is not None:
        ignore += selection.ignore
        targets = list(selection.targets)
    modifier = QuantizationModifier(targets=targets, scheme=recipe.preset, ignore=ignore)
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
    if selection is not None and selection.config_names_fused:
        _name_fused_modules_in_config(dst)


def _name_fused_modules_in_config(folder: Path) -> None:
    """Rewrite the config's ignore list to name fused modules (vLLM's names) where it lists
    all their shards, as the config of a model fused on disk does."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    qc = config["quantization_config"]
    qc["ignore"] = name_fused_modules(list(qc.get("ignore") or []))
    path.write_text(json.dumps(config, indent=2, sort_keys=True))


def _quark(model: TinyModel, recipe: Recipe, src: Path, dst: Path) -> None:
    """AMD Quark: its LLM template's scheme for the architecture, calibrated on the seeded
    token batches (static scales), exported real-quantized (``export_safetensors``)."""
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors
    from transformers import AutoModelForCausalLM

    net = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.bfloat16).eval()
    template = LLMTemplate.get(str(model.config["model_type"]))
    config = template.get_config(scheme=recipe.preset, exclude_layers=["lm_head"])
    tokens = torch.tensor(calibration_tokens(model))
    # a tensor is indexable by row, as a Dataset: batches of 4 sequences
    calibration: torch.utils.data.DataLoader[torch.Tensor] = torch.utils.data.DataLoader(
        tokens,  # type: ignore[arg-type]
        batch_size=4,
    )
    quantized = ModelQuantizer(config).quantize_model(net, calibration)
    with torch.no_grad():
        export_safetensors(quantized, dst)


LLMC = "llmcompressor"
QUARK = "amd-quark"
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(LLMC, "FP8_DYNAMIC", "fp8_per_channel", False, _llmcompressor),
        Recipe(LLMC, "FP8", "fp8_per_tensor", True, _llmcompressor),
        Recipe(LLMC, "FP8_BLOCK", "fp8_per_block", False, _llmcompressor),
        # the MX / FP4 presets of llm-compressor 0.14 with a harness scheme (MXFP8A16, MX
        # weights with bf16 activations, has none); NVFP4 calibrates its input global scale
        Recipe(LLMC, "NVFP4A16", "w_nvfp4", False, _llmcompressor),
        Recipe(LLMC, "NVFP4", "w_nvfp4_a_nvfp4", True, _llmcompressor),
        Recipe(LLMC, "MXFP4A16", "w_mxfp4", False, _llmcompressor),
        Recipe(LLMC, "MXFP4", "w_mxfp4_a_mxfp4", False, _llmcompressor),
        Recipe(LLMC, "MXFP8", "w_mxfp8_a_mxfp8", False, _llmcompressor),
        # Quark's FP8 per-tensor static and OCP MXFP4 (E8M0 scales rounded "even")
        Recipe(QUARK, "fp8", "fp8_per_tensor", True, _quark),
        Recipe(QUARK, "mxfp4", "w_mxfp4_a_mxfp4@even", False, _quark),
        # layer selections (harness.models.selection) on the dynamic FP8 preset: no
        # calibration, so each costs one quantization and one engine start
        *(
            Recipe(LLMC, "FP8_DYNAMIC", "fp8_per_channel", False, _llmcompressor, selection)
            for selection in SELECTIONS.values()
        ),
    )
}
