"""A compressed-tensors checkpoint folder, read as the harness's per-layer checkpoints.

`read_model_checkpoint` reads ``config.json`` and every ``*.safetensors`` file of a folder a
tool wrote, maps its ``quantization_config`` to a harness scheme through the explicit table
`SCHEMES_BY_CONFIG`, and groups the quantized tensors into `LinearCheckpoint`s the way vLLM
fuses them (`FUSED`: q/k/v into ``qkv_proj``, gate/up into ``gate_up_proj``), so the loading
suite's validators and invariants apply to real files unchanged. What the files hold is
kept as stored (scale dtypes included): `stored_dtypes` reports it, `as_harness_checkpoint`
converts scales to float32 for the harness's validators and records that it did.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from harness.core.schemes import Scheme, get_scheme
from harness.loading.checkpoint import LinearCheckpoint, QuantConfig, Shard

# vLLM's fused module -> the checkpoint modules it loads, in shard order
FUSED: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}
SHARD_OF = {part: fused for fused, parts in FUSED.items() for part in parts}


def _key(args: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if args is None:
        return None
    block = args.get("block_structure")
    return (
        args.get("type"),
        args.get("num_bits"),
        args.get("strategy"),
        bool(args.get("dynamic")),  # "local" (NVFP4 activations' local scales) is dynamic
        None if block is None else tuple(block),
        args.get("group_size"),
    )


# (weights args, input-activation args) as compressed-tensors writes them (type, bits,
# strategy, dynamic, block, group size; None: activations not quantized) -> harness scheme
NVFP4_W = ("float", 4, "tensor_group", False, None, 16)
MXFP4_W = ("float", 4, "group", False, None, 32)
SCHEMES_BY_CONFIG: dict[tuple[Any, Any], str] = {
    (
        ("float", 8, "channel", False, None, None),
        ("float", 8, "token", True, None, None),
    ): "fp8_per_channel",
    (
        ("float", 8, "tensor", False, None, None),
        ("float", 8, "tensor", False, None, None),
    ): "fp8_per_tensor",
    (
        ("float", 8, "block", False, (128, 128), None),
        ("float", 8, "group", True, None, 128),
    ): "fp8_per_block",
    (NVFP4_W, None): "w_nvfp4",
    (NVFP4_W, ("float", 4, "tensor_group", True, None, 16)): "w_nvfp4_a_nvfp4",
    (MXFP4_W, None): "w_mxfp4",
    (MXFP4_W, ("float", 4, "group", True, None, 32)): "w_mxfp4_a_mxfp4",
    (
        ("float", 8, "group", False, None, 32),
        ("float", 8, "group", True, None, 32),
    ): "w_mxfp8_a_mxfp8",
}


# a quantized module's tensors, as the tools name them (FP8; packed FP4; NVFP4 global scales)
STORED_FIELDS = (
    "weight",
    "weight_packed",
    "weight_scale",
    "weight_global_scale",
    "input_scale",
    "input_global_scale",
    "bias",
)


@dataclass(frozen=True)
class ModelCheckpoint:
    """A quantized model folder: its scheme, its tensors, and the fused layers."""

    folder: Path
    config: dict[str, Any]
    scheme: Scheme
    tensors: dict[str, torch.Tensor]
    quantized: tuple[str, ...]  # checkpoint module names with a quantized weight
    ignored: tuple[str, ...] = field(default_factory=tuple)
    method: str = "compressed-tensors"  # the config's quant_method (the tool's format)

    def stored_dtypes(self, module: str) -> dict[str, str]:
        return {
            f: str(self.tensors[f"{module}.{f}"].dtype).removeprefix("torch.")
            for f in STORED_FIELDS
            if f"{module}.{f}" in self.tensors
        }


def _quark_key(args: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if args is None:
        return None
    return (
        args.get("dtype"),
        args.get("qscheme"),
        bool(args.get("is_dynamic")),
        args.get("group_size"),
        args.get("scale_calculation_mode"),
    )


# (weight, input tensors) of Quark's global_quant_config (dtype, qscheme, dynamic, group
# size, E8M0 scale rounding) -> harness scheme
QUARK_SCHEMES: dict[tuple[Any, Any], str] = {
    (
        ("fp8_e4m3", "per_tensor", False, None, None),
        ("fp8_e4m3", "per_tensor", False, None, None),
    ): "fp8_per_tensor",
    (
        ("fp4", "per_group", False, 32, "even"),
        ("fp4", "per_group", True, 32, "even"),
    ): "w_mxfp4_a_mxfp4@even",
}


def _quark_scheme(qc: dict[str, Any]) -> str:
    """A Quark config's scheme (its global config; per-layer configs are not supported)."""
    if qc.get("layer_quant_config") or qc.get("layer_type_quant_config"):
        raise ValueError("Quark per-layer quant configs are not supported")
    g = qc.get("global_quant_config") or {}
    key = (_quark_key(g.get("weight")), _quark_key(g.get("input_tensors")))
    if key not in QUARK_SCHEMES:
        raise ValueError(f"no harness scheme for Quark arguments {key}")
    return QUARK_SCHEMES[key]


def _compressed_tensors_scheme(qc: dict[str, Any]) -> str:
    if not qc.get("config_groups"):
        raise ValueError("config.json has no compressed-tensors config groups")
    groups = list(qc["config_groups"].values())
    if len(groups) != 1:
        raise ValueError(f"{len(groups)} config groups; one is supported")
    key = (_key(groups[0].get("weights")), _key(groups[0].get("input_activations")))
    if key not in SCHEMES_BY_CONFIG:
        raise ValueError(f"no harness scheme for compressed-tensors arguments {key}")
    return SCHEMES_BY_CONFIG[key]


# the config's ``quant_method`` -> how its scheme is read
SCHEME_READERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "compressed-tensors": _compressed_tensors_scheme,
    "quark": _quark_scheme,
}


def quant_method(config: dict[str, Any]) -> str:
    qc = config.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    if method not in SCHEME_READERS:
        raise ValueError(
            f"config.json's quantization_config has quant_method {method!r}; "
            f"known: {sorted(SCHEME_READERS)}"
        )
    return str(method)


def scheme_of(config: dict[str, Any]) -> Scheme:
    """The harness scheme of a compressed-tensors (one config group) or Quark (one global
    config) checkpoint's config."""
    return get_scheme(SCHEME_READERS[quant_method(config)](config["quantization_config"]))


def _split(name: str) -> tuple[str, str, str]:
    return name.rpartition(".")


def read_model_checkpoint(folder: Path) -> ModelCheckpoint:
    config = json.loads((folder / "config.json").read_text())
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        tensors |= load_file(str(file))
    quantized = tuple(
        sorted(module for module, _, kind in map(_split, tensors) if kind == "weight_scale")
    )
    qc = config["quantization_config"]
    ignored = tuple(qc.get("ignore") or qc.get("exclude") or [])
    return ModelCheckpoint(
        folder, config, scheme_of(config), tensors, quantized, ignored, quant_method(config)
    )


def vllm_layer_name(module: str) -> tuple[str, str]:
    """(vLLM module name, shard name) of a checkpoint module (shard "" when unfused)."""
    parent, _, leaf = module.rpartition(".")
    if leaf in SHARD_OF:
        return f"{parent}.{SHARD_OF[leaf]}", leaf
    return module, ""


def layer_modules(ckpt: ModelCheckpoint) -> dict[str, tuple[str, ...]]:
    """vLLM module name -> the checkpoint modules that make it, in shard order."""
    out: dict[str, list[str]] = {}
    for module in ckpt.quantized:
        name, _ = vllm_layer_name(module)
        out.setdefault(name, []).append(module)
    order = {part: i for parts in FUSED.values() for i, part in enumerate(parts)}
    return {
        name: tuple(sorted(mods, key=lambda m: order.get(m.rpartition(".")[2], 0)))
        for name, mods in out.items()
    }


def as_harness_checkpoint(ckpt: ModelCheckpoint, layer: str) -> LinearCheckpoint:
    """One vLLM layer's shards as a `LinearCheckpoint` (scales as float32, biases joined)."""
    modules = layer_modules(ckpt)[layer]
    parent = layer.rpartition(".")[0]
    shards = []
    biases = []
    for module in modules:
        t = ckpt.tensors
        w = t[f"{module}.weight"]
        scale = t[f"{module}.weight_scale"].float()
        if ckpt.scheme.weight.granularity == "per_tensor":
            scale = scale.reshape(())
        inp = t.get(f"{module}.input_scale")
        shards.append(
            Shard(
                name=module.removeprefix(parent + ".") if len(modules) > 1 else "",
                width=int(w.shape[0]),
                weight=w,
                weight_scale=scale,
                input_scale=None if inp is None else inp.float().reshape(()),
            )
        )
        if f"{module}.bias" in t:
            biases.append(t[f"{module}.bias"])
    prefix = parent if len(modules) > 1 else modules[0]
    bias = torch.cat(biases) if biases else None
    return LinearCheckpoint(
        prefix=prefix,
        config=QuantConfig("fp8", ckpt.scheme.name),
        shards=tuple(shards),
        bias=bias,
        source=str(ckpt.folder),
    )
