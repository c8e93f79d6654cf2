"""Quantized linear checkpoints as engines read them, and their safetensors files.

A checkpoint holds, per shard of a (possibly fused) linear layer: the FP8 weight stored with
a torch float8 dtype, its weight scale, an optional static input scale, and one bias for the
whole layer. Fused layers (QKV, gate/up) list their shards with logical widths; each shard has
its own scales, as it was quantized on its own. The quantization config (method + scheme) and
the layer layout travel in the safetensors ``__metadata__`` as JSON strings.

A fused layer may also be stored fused on disk (one ``qkv_proj`` / ``gate_up_proj`` tensor
with one set of scales, as some models ship): one stored shard, with the logical shards it
holds listed in ``logical`` (names and widths), which an engine's fused layer still has.
Scales are stored in their scale format's checkpoint dtype (`STORED_SCALE_DTYPES`: float32,
or float8_e8m0fnu for power-of-two E8M0 scales); `scale_values` reads either as float32.

`read_checkpoint` validates everything before returning: a bad file raises `CheckpointError`
naming the tensor and what was expected, and nothing is returned half-read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from harness.core.files import UnreadableFileError, check_regular_file
from harness.core.formats import decode, get_format
from harness.core.quantize import QuantizedTensor, quantize, scale_grid, tile_amax
from harness.core.scales import compute_scale
from harness.core.schemes import WHOLE, QuantSpec, Scheme, UnknownSchemeError, get_scheme
from harness.errors import QHarnessError

CONFIG_KEY = "quantization_config"  # __metadata__ key: {"method": ..., "scheme": ...}
LAYOUT_KEY = "qharness_layer"  # __metadata__ key: {"prefix": ..., "shards": [[name, width]...]}
# A scale must leave headroom for the largest code times the scale, doubled (loaders double
# scales when they normalize e4m3fn to e4m3fnuz), to stay a finite float32: a bigger scale
# loads into inf/NaN weights.
SCALE_HEADROOM = 2.0
FLOAT32_MAX = float(torch.finfo(torch.float32).max)
# The dtype a checkpoint stores each weight scale format in (safetensors F32 / F8_E8M0):
# power-of-two E8M0 scales are stored as the byte torch calls float8_e8m0fnu.
STORED_SCALE_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "e8m0": torch.float8_e8m0fnu,
}


def stored_scale_dtypes(spec: QuantSpec) -> tuple[torch.dtype, ...]:
    """The dtypes a checkpoint may store ``spec``'s weight scales in: float32 values (as
    many tools write even power-of-two scales), or the scale format's own bytes."""
    return tuple(dict.fromkeys((torch.float32, STORED_SCALE_DTYPES[spec.scale_fmt.name])))


def stored_scale(scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """float32 scale values as a checkpoint of ``spec`` stores them (lossless: the scale
    format's codec raises on a value it cannot hold)."""
    dtype = STORED_SCALE_DTYPES[spec.scale_fmt.name]
    if dtype == torch.float32:
        return scale.float()
    return spec.scale_fmt.store(scale.float().contiguous()).view(dtype)


def scale_values(scale: torch.Tensor) -> torch.Tensor:
    """A stored scale's float32 values, exactly (E8M0 bytes are powers of two)."""
    return scale.float()


class CheckpointError(QHarnessError, ValueError):
    """A checkpoint that cannot be loaded: names the file or tensor and what was expected."""


@dataclass(frozen=True)
class QuantConfig:
    """What a checkpoint says about its quantization: the method (loader) and the scheme."""

    method: str  # "fp8", "quark", ...: which loader reads it by default
    scheme: str  # a registered scheme name (harness.core.schemes)

    def to_json(self) -> dict[str, str]:
        return {"method": self.method, "scheme": self.scheme}

    @classmethod
    def from_json(cls, data: Any, where: str) -> QuantConfig:
        if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("method", "scheme")
        ):
            raise CheckpointError(
                f"{where}: {CONFIG_KEY} must be a JSON object with string fields 'method' and "
                f"'scheme', got {data!r}"
            )
        return cls(data["method"], data["scheme"])


@dataclass(frozen=True)
class Shard:
    """One logical part of a fused layer (or the whole of an unfused one)."""

    name: str  # "" for an unfused layer; "q_proj", "k_proj", ... for fused ones
    width: int  # output rows of this shard (may be 0)
    weight: torch.Tensor  # float8 dtype [width, K]
    weight_scale: torch.Tensor | None  # `STORED_SCALE_DTYPES`, `weight_scale_shapes`; None: absent
    input_scale: torch.Tensor | None  # float32 (), static activation scale


@dataclass(frozen=True)
class LinearCheckpoint:
    """A quantized linear layer as stored: shards, their scales, and one optional bias [N]."""

    prefix: str
    config: QuantConfig
    shards: tuple[Shard, ...]
    bias: torch.Tensor | None = None
    source: str = "<memory>"  # file the checkpoint came from, for error messages
    # fused on disk: the logical shards (name, width) the one stored shard holds; () when
    # every logical shard is stored on its own
    logical: tuple[tuple[str, int], ...] = ()

    @property
    def scheme(self) -> Scheme:
        return get_scheme(self.config.scheme)

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(s.width for s in self.shards)

    @property
    def fused(self) -> bool:
        """Several shards stored on their own (each with its own scales)."""
        return len(self.shards) > 1

    @property
    def fused_on_disk(self) -> bool:
        """One stored tensor holding several logical shards (one set of scales)."""
        return bool(self.logical)

    @property
    def logical_shards(self) -> tuple[tuple[str, int], ...]:
        """The layer's logical shards (name, width), as an engine's fused layer has them."""
        return self.logical or tuple((s.name, s.width) for s in self.shards)

    @property
    def logical_widths(self) -> tuple[int, ...]:
        return tuple(width for _, width in self.logical_shards)

    def logical_name(self, index: int, field_name: str) -> str:
        """A logical shard's tensor name (fused on disk: what it would be stored as)."""
        name = self.logical_shards[index][0]
        return ".".join(p for p in (self.prefix, name, field_name) if p)

    def tensor_name(self, shard: Shard, field_name: str) -> str:
        parts = [p for p in (self.prefix, shard.name, field_name) if p]
        return ".".join(parts)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every stored tensor by its checkpoint name (absent scales are left out)."""
        out: dict[str, torch.Tensor] = {}
        for shard in self.shards:
            out[self.tensor_name(shard, "weight")] = shard.weight
            if shard.weight_scale is not None:
                out[self.tensor_name(shard, "weight_scale")] = shard.weight_scale
            if shard.input_scale is not None:
                out[self.tensor_name(shard, "input_scale")] = shard.input_scale
        if self.bias is not None:
            out[f"{self.prefix}.bias"] = self.bias
        return out

    def shard_codes(self, shard: Shard) -> torch.Tensor:
        """The shard's weight as uint8 codes (one per element)."""
        return shard.weight.contiguous().view(torch.uint8)

    def dequantize_shard(self, index: int) -> torch.Tensor:
        """Exact float32 values shard ``index`` stands for (its own codes and scale)."""
        shard = self.shards[index]
        spec = self.scheme.weight
        if shard.weight_scale is None:
            raise CheckpointError(f"{self.tensor_name(shard, 'weight_scale')} is absent")
        codes = self.shard_codes(shard)
        grid = scale_values(shard.weight_scale).reshape(scale_grid(spec, codes.shape))
        return QuantizedTensor(codes, grid, spec).dequantize()

    def without_bias(self) -> LinearCheckpoint:
        return replace(self, bias=None)


# ------------------------------------------------------------------------- building
def weight_scale_shapes(spec: QuantSpec, width: int, k: int) -> tuple[tuple[int, ...], ...]:
    """Scale shapes a checkpoint may store for a [width, K] weight; the first is canonical.

    Per-tensor scales are scalars (as FP8 checkpoints store them); per-channel scales are the
    column (width, 1) or the vector (width,); other granularities their tile grid.
    """
    if spec.block == (WHOLE, WHOLE):
        return ((),)
    if spec.block == (1, WHOLE):
        return ((width, 1), (width,))
    grid_rows, grid_cols = scale_grid(spec, (max(width, 1), k))
    return ((grid_rows if width else 0, grid_cols),)


def build_checkpoint(
    prefix: str,
    config: QuantConfig,
    shard_weights: dict[str, torch.Tensor],
    bias: torch.Tensor | None,
    input_scales: dict[str, torch.Tensor] | None = None,
    scale_margins: dict[str, float] | None = None,
) -> LinearCheckpoint:
    """Quantize float weights shard by shard with the reference quantizer.

    ``shard_weights`` maps shard name ("" for unfused) to a [width, K] float tensor, in order.
    Zero-width shards get no weight scale (an engine never loads one for them); static input
    scales are given per shard name (shards left out get none). ``scale_margins`` multiply a
    shard's scales (amax / qmax) as calibration tools leave headroom, so stored scales are
    not exactly amax / qmax (shards left out get none); formats that hold powers of two
    only (E8M0) keep their rule's scales.
    """
    scheme = get_scheme(config.scheme)
    shards = []
    for name, w in shard_weights.items():
        fmt = get_format(scheme.weight.format)
        if w.shape[0] == 0:
            codes = torch.zeros(w.shape, dtype=torch.uint8)
            scale = None
        else:
            margin = 1.0 if scale_margins is None else scale_margins.get(name, 1.0)
            if scheme.weight.scale_fmt.power_of_two:
                # a power-of-two (E8M0) format: tools store the rule's own scales, which a
                # headroom factor would take off the format's grid
                margin = 1.0
            tile_scales = compute_scale(tile_amax(w.float(), scheme.weight), scheme.weight)
            q = quantize(w, scheme.weight, tile_scales * margin)
            codes = q.codes
            shape = weight_scale_shapes(scheme.weight, *w.shape)[0]
            scale = stored_scale(q.scale.reshape(shape), scheme.weight)
        given = None if input_scales is None else input_scales.get(name)
        in_scale = None if given is None else given.float().reshape(())
        weight = codes.view(fmt.to_torch_dtype())
        shards.append(Shard(name, int(w.shape[0]), weight, scale, in_scale))
    return LinearCheckpoint(prefix, config, tuple(shards), bias)


# --------------------------------------------------------------------------- files
def save_checkpoint(ckpt: LinearCheckpoint, path: Path | str) -> None:
    """Write a safetensors file: FP8 weights with float8 dtypes, config in __metadata__."""
    layout: dict[str, Any] = {
        "prefix": ckpt.prefix,
        "shards": [[s.name, s.width] for s in ckpt.shards],
    }
    if ckpt.logical:
        layout["logical"] = [[name, width] for name, width in ckpt.logical]
    metadata = {CONFIG_KEY: json.dumps(ckpt.config.to_json()), LAYOUT_KEY: json.dumps(layout)}
    tensors = {k: v.detach().cpu().contiguous() for k, v in ckpt.tensors().items()}
    save_file(tensors, str(path), metadata=metadata)


def _read_raw(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    try:
        check_regular_file(path, "checkpoint")  # a FIFO must not hang the reader
    except UnreadableFileError as exc:
        raise CheckpointError(str(exc)) from None
    try:
        with safe_open(str(path), framework="pt") as fh:
            metadata = dict(fh.metadata() or {})
            tensors = {name: fh.get_tensor(name) for name in fh.keys()}  # noqa: SIM118
    except (SafetensorError, OSError, RuntimeError, ValueError) as exc:
        raise CheckpointError(
            f"{path}: not a readable safetensors file (truncated or corrupted?): {exc}"
        ) from exc
    return tensors, metadata


def _json_field(metadata: dict[str, str], key: str, where: str) -> Any:
    if key not in metadata:
        raise CheckpointError(f"{where}: __metadata__ lacks {key!r}; found {sorted(metadata)}")
    try:
        return json.loads(metadata[key])
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{where}: __metadata__[{key!r}] is not JSON: {exc}") from exc
    except RecursionError:
        raise CheckpointError(f"{where}: __metadata__[{key!r}] is nested too deeply") from None


def _pairs(items: Any, field: str) -> list[tuple[str, int]]:
    """``[[name, width], ...]``: strings and non-negative integers (not bools, floats, NaN
    or Infinity, which JSON parsers accept)."""
    if not isinstance(items, list):
        raise CheckpointError(f"{field} must be a list of [name, width] pairs")
    specs = []
    for i, item in enumerate(items):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise CheckpointError(f"{field}[{i}] must be [name, width], got {item!r}")
        width = item[1]
        if type(width) is not int or width < 0:
            raise CheckpointError(
                f"{field}[{i}] width must be a non-negative integer, got {width!r}"
            )
        specs.append((item[0], width))
    return specs


def _layout(
    layout: Any, where: str
) -> tuple[str, list[tuple[str, int]], tuple[tuple[str, int], ...]]:
    """The layer prefix, ``[(shard name, width)]`` stored, and the logical shards of a
    layer fused on disk (``()`` when absent)."""
    expected = "{'prefix': str, 'shards': [[name, width], ...]}"
    field = f"{where}: __metadata__[{LAYOUT_KEY!r}]"
    if not isinstance(layout, dict) or not isinstance(layout.get("prefix"), str):
        raise CheckpointError(f"{field} must be {expected}; 'prefix' is missing or not a string")
    specs = _pairs(layout.get("shards"), f"{field}['shards']")
    logical: tuple[tuple[str, int], ...] = ()
    if "logical" in layout:
        logical = tuple(_pairs(layout["logical"], f"{field}['logical']"))
    return layout["prefix"], specs, logical


def read_checkpoint(path: Path | str) -> LinearCheckpoint:
    """Read and validate a checkpoint file; raises `CheckpointError` on any problem."""
    path = Path(path)
    where = str(path)
    tensors, metadata = _read_raw(path)
    config = QuantConfig.from_json(_json_field(metadata, CONFIG_KEY, where), where)
    prefix, shard_specs, logical = _layout(_json_field(metadata, LAYOUT_KEY, where), where)
    probe = LinearCheckpoint(prefix, config, (), None, where)
    shards = []
    for name, width in shard_specs:
        stub = Shard(name, width, torch.empty(0), None, None)
        weight_name = probe.tensor_name(stub, "weight")
        if weight_name not in tensors:
            raise CheckpointError(f"{where}: tensor {weight_name!r} is missing")
        shards.append(
            Shard(
                name,
                width,
                tensors[weight_name],
                tensors.get(probe.tensor_name(stub, "weight_scale")),
                tensors.get(probe.tensor_name(stub, "input_scale")),
            )
        )
    bias = tensors.get(f"{prefix}.bias")
    ckpt = LinearCheckpoint(prefix, config, tuple(shards), bias, where, logical)
    validate_checkpoint(ckpt)
    return ckpt


# ----------------------------------------------------------------------- validation
def _check_scale_values(
    name: str,
    scale: torch.Tensor,
    where: str,
    code_max: float,
    dtypes: tuple[torch.dtype, ...] = (torch.float32,),
) -> None:
    if scale.dtype not in dtypes:
        expected = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise CheckpointError(f"{where}: tensor {name!r} is {scale.dtype}, expected {expected}")
    scale = scale_values(scale)
    bad = ~(torch.isfinite(scale) & (scale > 0))
    if bool(bad.any()):
        first = tuple(int(i) for i in bad.nonzero()[0]) if scale.dim() else ()
        value = float(scale.reshape(-1)[bad.reshape(-1)][0])
        raise CheckpointError(
            f"{where}: tensor {name!r} holds {int(bad.sum())} scale(s) that are not finite and "
            f"positive (first at index {first}: {value}); scales must be finite and > 0"
        )
    limit = FLOAT32_MAX / (code_max * SCALE_HEADROOM)
    if scale.numel() and float(scale.max()) > limit:
        raise CheckpointError(
            f"{where}: tensor {name!r} holds a scale of {float(scale.max()):.6g}, too large: the "
            f"largest code ({code_max:g}) times it, doubled when a loader normalizes "
            f"e4m3fn/e4m3fnuz, overflows float32; scales must be <= {limit:.6g}"
        )


# Each validator checks one thing and raises `CheckpointError` naming the tensor and the
# expectation; they run in table order, so the first problem found is the one reported.
ShardValidator = Callable[[LinearCheckpoint, Scheme, Shard], None]
LayerValidator = Callable[[LinearCheckpoint, Scheme], None]


def _weight_dtype(ckpt: LinearCheckpoint, scheme: Scheme, shard: Shard) -> None:
    fmt = get_format(scheme.weight.format)
    if shard.weight.dtype != fmt.to_torch_dtype():
        raise CheckpointError(
            f"{ckpt.source}: tensor {ckpt.tensor_name(shard, 'weight')!r} is "
            f"{shard.weight.dtype}, but scheme {scheme.name} stores {fmt.name} weights "
            f"({fmt.to_torch_dtype()})"
        )


def _weight_shape(ckpt: LinearCheckpoint, scheme: Scheme, shard: Shard) -> None:
    if shard.weight.dim() != 2 or shard.weight.shape[0] != shard.width:
        raise CheckpointError(
            f"{ckpt.source}: tensor {ckpt.tensor_name(shard, 'weight')!r} has shape "
            f"{tuple(shard.weight.shape)}, expected ({shard.width}, K) for a shard of width "
            f"{shard.width}"
        )


def _weight_codes_finite(ckpt: LinearCheckpoint, scheme: Scheme, shard: Shard) -> None:
    fmt = get_format(scheme.weight.format)
    nan_codes = torch.isnan(decode(shard.weight.contiguous().view(torch.uint8), fmt))
    if bool(nan_codes.any()):
        raise CheckpointError(
            f"{ckpt.source}: tensor {ckpt.tensor_name(shard, 'weight')!r} holds "
            f"{int(nan_codes.sum())} NaN codes; a weight must be finite"
        )


def _weight_scale(ckpt: LinearCheckpoint, scheme: Scheme, shard: Shard) -> None:
    where, sname = ckpt.source, ckpt.tensor_name(shard, "weight_scale")
    k = int(shard.weight.shape[1])
    allowed = weight_scale_shapes(scheme.weight, shard.width, k)
    if shard.weight_scale is None:
        if shard.width:
            raise CheckpointError(
                f"{where}: tensor {sname!r} is missing; scheme {scheme.name} needs a "
                f"{STORED_SCALE_DTYPES[scheme.weight.scale_fmt.name]} "
                f"{scheme.weight.granularity} weight scale of shape {allowed[0]}"
            )
        return
    if tuple(shard.weight_scale.shape) not in allowed:
        raise CheckpointError(
            f"{where}: tensor {sname!r} has shape {tuple(shard.weight_scale.shape)}, "
            f"expected one of {list(allowed)} for {scheme.weight.granularity} scales of a "
            f"{(shard.width, k)} weight"
        )
    _check_scale_values(
        sname,
        shard.weight_scale,
        where,
        get_format(scheme.weight.format).max_finite,
        stored_scale_dtypes(scheme.weight),
    )


def _input_scale(ckpt: LinearCheckpoint, scheme: Scheme, shard: Shard) -> None:
    where, iname = ckpt.source, ckpt.tensor_name(shard, "input_scale")
    static = scheme.activation is not None and not scheme.activation.dynamic
    if shard.input_scale is None:
        if static and shard.width:
            raise CheckpointError(
                f"{where}: tensor {iname!r} is missing; scheme {scheme.name} has static "
                "activation scales and needs a float32 scalar input scale"
            )
        return
    if not static:
        raise CheckpointError(
            f"{where}: tensor {iname!r} is present but scheme {scheme.name} has no "
            "static activation scale; the config and the tensors disagree"
        )
    if tuple(shard.input_scale.shape) != ():
        raise CheckpointError(
            f"{where}: tensor {iname!r} has shape {tuple(shard.input_scale.shape)}, "
            "expected () (one per-tensor input scale)"
        )
    act_format = scheme.activation.format if scheme.activation else scheme.weight.format
    _check_scale_values(iname, shard.input_scale, where, get_format(act_format).max_finite)


SHARD_VALIDATORS: tuple[ShardValidator, ...] = (
    _weight_dtype,
    _weight_shape,
    _weight_codes_finite,
    _weight_scale,
    _input_scale,
)


def _has_shards(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    if not ckpt.shards:
        raise CheckpointError(f"{ckpt.source}: layer {ckpt.prefix!r} lists no shards")


def _fp8_family(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    if scheme.family != "fp8":
        raise CheckpointError(
            f"{ckpt.source}: scheme {scheme.name} ({scheme.family}) cannot be loaded: "
            "checkpoint loading covers FP8 schemes (float8 weights with float32 scales)"
        )


def _every_shard(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    for shard in ckpt.shards:
        for validate in SHARD_VALIDATORS:
            validate(ckpt, scheme, shard)


def _shards_agree_on_k(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    ks = {int(shard.weight.shape[1]) for shard in ckpt.shards}
    if len(ks) > 1:
        raise CheckpointError(
            f"{ckpt.source}: shards of {ckpt.prefix!r} disagree on K: {sorted(ks)}"
        )


def _logical_shards(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    """A layer fused on disk is one stored shard holding all of its logical shards."""
    if not ckpt.logical:
        return
    stored = sum(ckpt.widths)
    if len(ckpt.shards) != 1 or sum(w for _, w in ckpt.logical) != stored:
        raise CheckpointError(
            f"{ckpt.source}: layer {ckpt.prefix!r} lists logical shards {list(ckpt.logical)} "
            f"fused on disk, which must be one stored shard of their total width; found "
            f"{len(ckpt.shards)} stored shard(s) of width {stored}"
        )


def _bias(ckpt: LinearCheckpoint, scheme: Scheme) -> None:
    if ckpt.bias is None:
        return
    n, bname = sum(ckpt.widths), f"{ckpt.prefix}.bias"
    if tuple(ckpt.bias.shape) != (n,) or not ckpt.bias.is_floating_point():
        raise CheckpointError(
            f"{ckpt.source}: tensor {bname!r} is {tuple(ckpt.bias.shape)} {ckpt.bias.dtype}, "
            f"expected a floating-point ({n},) bias"
        )
    if not bool(torch.isfinite(ckpt.bias).all()):
        raise CheckpointError(f"{ckpt.source}: tensor {bname!r} holds non-finite values")


LAYER_VALIDATORS: tuple[LayerValidator, ...] = (
    _has_shards,
    _fp8_family,
    _every_shard,
    _shards_agree_on_k,
    _logical_shards,
    _bias,
)


def validate_checkpoint(ckpt: LinearCheckpoint) -> None:
    """Check every tensor against the config's scheme; raise `CheckpointError` on the first
    problem, naming the tensor and the expectation (validators: `LAYER_VALIDATORS`)."""
    try:
        scheme = ckpt.scheme
    except UnknownSchemeError as exc:
        raise CheckpointError(f"{ckpt.source}: {CONFIG_KEY} names {exc}") from None
    for validate in LAYER_VALIDATORS:
        validate(ckpt, scheme)


__all__ = [
    "CONFIG_KEY",
    "LAYOUT_KEY",
    "STORED_SCALE_DTYPES",
    "CheckpointError",
    "LinearCheckpoint",
    "QuantConfig",
    "Shard",
    "build_checkpoint",
    "read_checkpoint",
    "save_checkpoint",
    "scale_values",
    "stored_scale",
    "validate_checkpoint",
    "weight_scale_shapes",
]
