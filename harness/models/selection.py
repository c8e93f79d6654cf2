"""Layer selection: which linear layers of a checkpoint are quantized is the engine's decision.

vLLM decides it per layer it builds, from the checkpoint's config: the ignore list (module
names or ``re:`` patterns, which may name a shard or the fused module vLLM builds), the
targets (a class name or regexes) and its own fused-module table (q/k/v -> ``qkv_proj``,
gate/up -> ``gate_up_proj``). A `Selection` is one such config as a tool is told it, and,
written independently of that, the Hugging Face modules it must leave in the model dtype
(`left_float`). `expected_layer_states` turns the latter into what every vLLM layer must be:

- ``quantized``: none of its shards left float;
- ``float``: every shard left float (the layer runs unquantized, its weight the
  checkpoint's bf16 tensor bit for bit);
- ``refused``: some shards float, some not: one fused GEMM cannot be half quantized, and vLLM
  says it requires all shards of a fused layer to use the same scheme
  (``should_ignore_layer`` in its compressed-tensors utils raises), so the checkpoint must be
  refused with an error that names the layer, never loaded half right.

A recipe without a selection quantizes every Linear but lm_head and the model's own
``keep_float`` modules (MoE routers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.models.files import FUSED
from harness.models.tiny import TinyModel

QUANTIZED, FLOAT, REFUSED = "quantized", "float", "refused"


@dataclass(frozen=True)
class Selection:
    """One layer selection: what the tool is told, and what it must leave float."""

    name: str
    description: str
    left_float: tuple[str, ...]  # regexes (full match) over Hugging Face module names
    targets: tuple[str, ...] = ("Linear",)  # the tool's targets
    ignore: tuple[str, ...] = ()  # extra ignore entries for the tool (beside lm_head)
    # the checkpoint's config names a fused module (vLLM's name) where all its shards are
    # ignored, as a checkpoint of a model fused on disk would
    config_names_fused: bool = False


def _layer(i: int, rest: str) -> str:
    return f"model.layers.{i}.{rest}"


SELECTIONS: dict[str, Selection] = {
    s.name: s
    for s in (
        Selection(
            "ignore_fused_name",
            "layer 0's q/k/v left float, the config's ignore list naming vLLM's qkv_proj",
            left_float=(r"model\.layers\.0\.self_attn\.[qkv]_proj",),
            ignore=tuple(_layer(0, f"self_attn.{p}") for p in FUSED["qkv_proj"]),
            config_names_fused=True,
        ),
        Selection(
            "ignore_shards",
            "layer 1's gate and up shards and layer 0's down projection left float, named "
            "shard by shard",
            left_float=(
                r"model\.layers\.1\.mlp\.(gate|up)_proj",
                r"model\.layers\.0\.mlp\.down_proj",
            ),
            ignore=(
                _layer(1, "mlp.gate_proj"),
                _layer(1, "mlp.up_proj"),
                _layer(0, "mlp.down_proj"),
            ),
        ),
        Selection(
            "targets_regex",
            "only the attention projections targeted, by regex: every MLP layer left float",
            left_float=(r".*\.mlp\.(gate|up|down)_proj",),
            targets=(r"re:.*self_attn\.(q|k|v|o)_proj$",),
        ),
        Selection(
            "ignore_one_shard",
            "layer 0's k_proj alone left float: its qkv_proj would be half quantized",
            left_float=(r"model\.layers\.0\.self_attn\.k_proj",),
            ignore=(_layer(0, "self_attn.k_proj"),),
        ),
    )
}


def shards_of(layer: str) -> tuple[str, ...]:
    """The checkpoint modules a vLLM layer is made of (itself, unless fused)."""
    parent, _, leaf = layer.rpartition(".")
    return tuple(f"{parent}.{part}" for part in FUSED.get(leaf, (leaf,)))


def _left_float(selection: Selection, module: str) -> bool:
    return any(re.fullmatch(pattern, module) for pattern in selection.left_float)


def expected_layer_states(model: TinyModel, selection: Selection | None) -> dict[str, str]:
    """vLLM layer -> ``quantized`` / ``float`` / ``refused`` (module doc), for every layer
    the recipe's default would quantize."""
    states = {}
    for layer in model.quantized_layers():
        floats = [
            selection is not None and _left_float(selection, shard) for shard in shards_of(layer)
        ]
        states[layer] = FLOAT if all(floats) else QUANTIZED if not any(floats) else REFUSED
    return states


def refuses(model: TinyModel, selection: Selection | None) -> bool:
    """Whether the checkpoint must be refused (a fused layer with mixed shards)."""
    return REFUSED in expected_layer_states(model, selection).values()


def name_fused_modules(ignore: list[str]) -> list[str]:
    """The ignore list with every complete set of a fused module's shards replaced by the
    fused module's name (vLLM's), other entries kept in order."""
    out = list(ignore)
    for fused, parts in FUSED.items():
        for entry in list(out):
            parent, _, leaf = entry.rpartition(".")
            if leaf != parts[0]:
                continue
            shards = [f"{parent}.{p}" for p in parts]
            if all(s in out for s in shards):
                at = out.index(entry)
                out = [e for e in out if e not in shards]
                out.insert(at, f"{parent}.{fused}")
    return out
