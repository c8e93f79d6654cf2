"""Checkpoint-loading cases: named checkpoints per FP8 scheme, and their golden builder.

Every scheme whose family is "fp8" gets every case (iterating the registry, so schemes
added later are covered). A case is a layer layout plus what makes it interesting:
an unfused single-scale layer, fused shards with very different scales, a zero-width
shard whose scale is never stored, and a weight holding e4m3fn's 0x80 (-0) codes.

Every checkpoint is as real calibration tools write them: weight scales carry a headroom
margin (`CALIBRATION_MARGINS`: amax / qmax times 1.09..1.29, different per shard, never a
power of two), and static input scales are calibrated on a batch other than the one fed
(`CALIBRATION_BATCH_GAIN` smaller), with their own margins, so the fed activation exceeds
them and saturates. A loader that requantizes fused shards to one scale computed from the
whole tensor's amax, instead of the largest stored shard scale, gets other scales and codes.

The golden entry ``loading/<scheme>/<case>`` stores the checkpoint (codes, scales, input
scales, bias), the input x, and two float64-derived references computed here with the
reference quantizer, independently of the loader transforms: the output without bias of
the correctly loaded layer, and |x| @ |W|^T for the error bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from harness.core.formats import decode, get_format
from harness.core.hard_inputs import plant_reciprocal_ties, reciprocal_tie_scale, tail_amax
from harness.core.inputs import generator, scaled_normal
from harness.core.quantize import (
    QuantizedTensor,
    calibrate_input_scale,
    quantize,
    quantize_activation,
    scale_grid,
)
from harness.core.schemes import SCHEMES, WHOLE, Scheme, get_scheme
from harness.loading.checkpoint import (
    LinearCheckpoint,
    QuantConfig,
    Shard,
    build_checkpoint,
    scale_values,
    stored_scale,
)
from harness.paths.base import Numerics, multiplied_activation
from harness.paths.case import Case
from harness.store.golden_registry import GoldenData, register_each

PREFIX = "model.layers.0.proj"
TOKENS = 4  # rows of x
FLAVOURS: tuple[str, ...] = ("e4m3fn", "e4m3fnuz")  # platform FP8 flavours loaded into
# Headroom factors on shard i's weight scale (cycled): distinct, none a power of two, each
# above the top code step of e4m3 (1/14), so the largest stored code is below qmax.
CALIBRATION_MARGINS: tuple[float, ...] = (1.17, 1.09, 1.29, 1.11)
# The calibration batch is the fed batch's seed-mate scaled by this power of two, so its
# amax (and the static input scale) is well below what the fed batch needs (the fed
# batch exceeds every merged static scale here: tests/loading/test_loading_checkpoint.py).
CALIBRATION_BATCH_GAIN = 0.25


@dataclass(frozen=True)
class LoadingCase:
    """A named checkpoint layout; widths are in units of the scheme's block rows."""

    name: str
    shards: tuple[tuple[str, int], ...]  # (shard name, width in units); "" = unfused
    weight_gain: tuple[float, ...]  # factor on each shard's float weight
    input_gain: tuple[float, ...]  # factor on each shard's calibrated static input scale
    negative_zeros: bool = False  # plant values that quantize to -0 (0x80 in e4m3fn)
    k: int = 0  # K of the layer (0: the scheme's default, `_k`)
    design: str = ""  # an input design of DESIGNS (designed cases only; no golden)


CASES: tuple[LoadingCase, ...] = (
    LoadingCase("unfused", (("", 2),), (1.0,), (1.0,)),
    # Shard scales 2^-6 and 2^4 apart (times non-powers of two, so requantizing is inexact).
    LoadingCase(
        "fused_spread_scales",
        (("q_proj", 2), ("k_proj", 1), ("v_proj", 1)),
        (1.0, 2**-6 * 1.37, 2**4 * 0.71),
        (1.0, 1.5, 0.75),
    ),
    LoadingCase(
        "zero_width_shard",
        (("q_proj", 2), ("k_proj", 0), ("v_proj", 1)),
        (1.0, 1.0, 0.3),
        (1.0, 1.0, 1.25),
    ),
    LoadingCase(
        "negative_zero_codes",
        (("gate_proj", 1), ("up_proj", 1)),
        (1.0, 0.55),
        (1.0, 1.0),
        negative_zeros=True,
    ),
)
# Designed cases: built at test time from their seeds and checked against the reference
# quantizer's float64 product (no golden entry). ``reciprocal_ties``: one static input scale
# S that is not a power of two, with activation elements at ties of x / S that a reciprocal
# multiply crosses (harness.core.hard_inputs); ``long_rows``: fused shards of K = 4224
# (33 * 128) whose rows, and the activation's, peak in their last 64 columns.
RECIPROCAL_TIES = "reciprocal_ties"
LONG_ROWS = "long_rows"
LONG_K = 4224
LONG_TAIL = 64
DESIGNED_CASES: tuple[LoadingCase, ...] = (
    LoadingCase("static_ties", (("", 1),), (1.0,), (1.0,), design=RECIPROCAL_TIES),
    LoadingCase(
        "long_k",
        (("q_proj", 1), ("k_proj", 1)),
        (1.0, 0.37),
        (1.0, 1.5),
        k=LONG_K,
        design=LONG_ROWS,
    ),
)
CASES_BY_NAME = {c.name: c for c in (*CASES, *DESIGNED_CASES)}


def fp8_schemes() -> list[str]:
    """Every registered scheme of the FP8 family (never by name)."""
    return sorted(name for name, s in SCHEMES.items() if s.family == "fp8")


GOLDEN_ENTRY = "loading/{scheme}/{case}"  # one golden entry per scheme and case


def golden_entry(scheme: str, case: str) -> str:
    return GOLDEN_ENTRY.format(scheme=scheme, case=case)


def _unit(scheme: Scheme) -> int:
    rows = scheme.weight.block[0]
    return rows if rows is not WHOLE and rows > 1 else 16


def _k(scheme: Scheme, case: LoadingCase | None = None) -> int:
    if case is not None and case.k:
        return case.k
    cols = scheme.weight.block[1]
    return max(64, cols if cols is not WHOLE else 0)


def _plant_negative_zeros(w: torch.Tensor, name: str) -> torch.Tensor:
    """Set a few elements to -1e-30: far below half the smallest subnormal of any tile's
    scale (tiles span at most ~1e-5..1e5 here), so they quantize to -0."""
    gen = generator(f"{name}/negative_zeros")
    rows = torch.randint(0, w.shape[0], (8,), generator=gen)
    cols = torch.randint(0, w.shape[1], (8,), generator=gen)
    w = w.clone()
    w[rows, cols] = torch.tensor(-1e-30).to(torch.bfloat16).float()
    return w


def _weights(scheme: Scheme, case: LoadingCase) -> dict[str, torch.Tensor]:
    k, unit = _k(scheme, case), _unit(scheme)
    out = {}
    for (name, units), gain in zip(case.shards, case.weight_gain, strict=True):
        base = f"loading/{scheme.name}/{case.name}/{name or 'weight'}"
        if units == 0:
            out[name] = torch.zeros(0, k)
            continue
        w = scaled_normal(base, units * unit, k, scheme.weight) * gain
        w = w.to(torch.bfloat16).float()
        if case.negative_zeros:
            w = _plant_negative_zeros(w, base)
        if case.design == LONG_ROWS:
            w = tail_amax(w, LONG_TAIL)
        out[name] = w
    return out


def _reciprocal_tie_inputs(
    x: torch.Tensor, scheme: Scheme, case: LoadingCase
) -> tuple[torch.Tensor, dict[str, torch.Tensor] | None]:
    """``x`` with rows 0 and 1 at ties of x / S, and S as every shard's static input scale
    (S = s * 2^e of `reciprocal_tie_scale`, the smallest with qmax * S above max|x|)."""
    act = scheme.activation
    fmt = act.format if act is not None else scheme.weight.format
    spec = act if act is not None else scheme.weight
    rt = reciprocal_tie_scale(fmt)
    exponent = math.ceil(math.log2(float(x.abs().max()) / (spec.qmax * rt.scale)))
    scale = rt.scale * 2.0**exponent
    x, _ = plant_reciprocal_ties(x, spec, scale)
    if act is None or act.dynamic:
        return x, None
    s = torch.tensor(scale, dtype=torch.float32)
    return x, {name: s for name, units in case.shards if units}


def build_case_checkpoint(
    scheme_name: str, case_name: str
) -> tuple[LinearCheckpoint, torch.Tensor]:
    """The checkpoint (no bias yet) and the input x, from seeded inputs."""
    scheme = get_scheme(scheme_name)
    case = CASES_BY_NAME[case_name]
    base_name = f"loading/{scheme_name}/{case_name}"
    x = scaled_normal(f"{base_name}/x", TOKENS, _k(scheme, case), scheme.activation)
    if case.design == LONG_ROWS:
        x = tail_amax(x, LONG_TAIL)
    margins = {
        name: CALIBRATION_MARGINS[i % len(CALIBRATION_MARGINS)]
        for i, (name, _) in enumerate(case.shards)
    }
    input_scales = None
    act = scheme.activation
    if case.design == RECIPROCAL_TIES:
        x, input_scales = _reciprocal_tie_inputs(x, scheme, case)
    elif act is not None and not act.dynamic:
        calibration = scaled_normal(f"{base_name}/calibration", TOKENS, _k(scheme, case), act)
        base = calibrate_input_scale(calibration * CALIBRATION_BATCH_GAIN, act).reshape(())
        input_scales = {
            name: base * gain * margins[name]
            for (name, units), gain in zip(case.shards, case.input_gain, strict=True)
            if units
        }
    ckpt = build_checkpoint(
        PREFIX,
        QuantConfig("fp8", scheme_name),
        _weights(scheme, case),
        None,
        input_scales,
        scale_margins=margins,
    )
    return ckpt, x


def expected_runtime_weight(
    ckpt: LinearCheckpoint, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Values the correctly loaded weight holds: shard values, requantized to the max scale
    for fused per-tensor layers (reference quantizer, in the checkpoint's format).

    ``dtype`` is that of code * scale: float32 as paths dequantize, or float64 (exact) for
    the center of a bit-exact rounding interval. Requantization itself always starts from
    the float32 shard values, as loaders compute them.
    """
    spec = ckpt.scheme.weight
    parts = []
    per_tensor_fused = spec.block == (WHOLE, WHOLE) and ckpt.fused
    scales = [s.weight_scale for s in ckpt.shards if s.weight_scale is not None]
    top = max(float(s) for s in scales) if per_tensor_fused else 0.0
    for i, shard in enumerate(ckpt.shards):
        if shard.width == 0:
            parts.append(torch.zeros(0, shard.weight.shape[1], dtype=dtype))
            continue
        values = ckpt.dequantize_shard(i)
        if per_tensor_fused:
            grid = torch.tensor([[top]], dtype=torch.float32)
            parts.append(quantize(values, spec, grid).dequantize(dtype))
        else:
            codes = ckpt.shard_codes(shard)
            scale = scale_values(shard.weight_scale)  # type: ignore[arg-type]
            grid = scale.reshape(scale_grid(spec, codes.shape))
            parts.append(QuantizedTensor(codes, grid, spec).dequantize(dtype))
    return torch.cat(parts, dim=0)


def reference_operands(
    ckpt: LinearCheckpoint,
    x: torch.Tensor,
    conventions: frozenset[str] = frozenset(),
    numerics: Numerics | None = None,
) -> tuple[torch.Tensor, ...]:
    """Exact float64 (activation, weight) a correctly loaded layer multiplies: the center
    of the rounding interval every path that rounds once must land in. ``conventions``:
    those the path declares for its activation quantizer (harness.core.conventions);
    ``numerics``: the path's, where they declare the activation unquantized."""
    a = multiplied_activation(x, ckpt.scheme, merged_input_scale(ckpt), conventions, numerics)
    return a, expected_runtime_weight(ckpt, torch.float64)


def merged_input_scale(ckpt: LinearCheckpoint) -> torch.Tensor | None:
    scales = [s.input_scale for s in ckpt.shards if s.input_scale is not None]
    return None if not scales else torch.stack(scales).max().reshape(1, 1)


def _bias_for(y: torch.Tensor, name: str, floor: torch.Tensor | None = None) -> torch.Tensor:
    """Bias of half to all of each column's largest |y| (or of ``floor`` where that is
    larger), random sign, bf16-valued.

    Column-relative, so it dwarfs every column's error bound: 0, 1 and 2 applications of
    it are told apart whatever the spread of the outputs. Long rows whose outputs cancel
    pass a ``floor`` above their accumulation bound (designed cases only).
    """
    gen = generator(name)
    peak = y.abs().amax(dim=0)
    if floor is not None:
        peak = torch.maximum(peak, floor)
    magnitude = (0.5 + 0.5 * torch.rand(y.shape[1], generator=gen)) * peak
    sign = torch.where(torch.rand(y.shape[1], generator=gen) < 0.5, -1.0, 1.0)
    return (magnitude * sign).to(torch.bfloat16).float()


def build_loading_golden(scheme_name: str, case_name: str) -> GoldenData:
    ckpt, x = build_case_checkpoint(scheme_name, case_name)
    scheme = ckpt.scheme
    case = CASES_BY_NAME[case_name]
    fmt = get_format(scheme.weight.format)
    if case.negative_zeros and float(decode(torch.tensor([0x80], dtype=torch.uint8), fmt)) == 0:
        n = sum(int((ckpt.shard_codes(s) == 0x80).sum()) for s in ckpt.shards)
        if n == 0:
            raise AssertionError(f"{scheme_name}/{case_name}: no 0x80 codes were planted")
    xq = quantize_activation(x, scheme, merged_input_scale(ckpt))
    a = (x if xq is None else xq.dequantize()).double()
    w = expected_runtime_weight(ckpt).double()
    y = a @ w.t()
    data = GoldenData()
    data.exact["x"] = x.to(torch.bfloat16)
    abs_product = a.abs() @ w.abs().t()
    floor = None
    if case.design:  # 8 gamma_{K+1}(u32) times each column's largest sum of magnitudes
        k = int(x.shape[1])
        floor = 8 * (k + 1) * 2.0**-24 * abs_product.amax(dim=0)
    bias = _bias_for(y, f"loading/{scheme_name}/{case_name}/bias", floor)
    data.exact["bias"] = bias.to(torch.bfloat16)
    for i, shard in enumerate(ckpt.shards):
        data.exact[f"shard{i}.weight_codes"] = ckpt.shard_codes(shard).clone()
        if shard.weight_scale is not None:
            data.exact[f"shard{i}.weight_scale"] = scale_values(shard.weight_scale)
        if shard.input_scale is not None:
            data.exact[f"shard{i}.input_scale"] = shard.input_scale
    data.reference["y_ref"] = y.float()
    data.reference["abs_product"] = abs_product.float()
    return data


def checkpoint_from_golden(data: GoldenData, scheme_name: str, case_name: str) -> LinearCheckpoint:
    """Rebuild the case's checkpoint from the golden's stored tensors (with its bias)."""
    scheme = get_scheme(scheme_name)
    case = CASES_BY_NAME[case_name]
    t = data.tensors
    dtype = get_format(scheme.weight.format).to_torch_dtype()
    shards = []
    for i, (name, _) in enumerate(case.shards):
        codes = t[f"shard{i}.weight_codes"]
        scale = t.get(f"shard{i}.weight_scale")  # float32 values in the golden
        shards.append(
            Shard(
                name,
                int(codes.shape[0]),
                codes.view(dtype),
                None if scale is None else stored_scale(scale, scheme.weight),
                t.get(f"shard{i}.input_scale"),
            )
        )
    return LinearCheckpoint(
        PREFIX,
        QuantConfig("fp8", scheme_name),
        tuple(shards),
        t["bias"].float(),
        f"golden:{golden_entry(scheme_name, case_name)}",
    )


register_each(
    build_loading_golden,
    ((golden_entry(s, c.name), (s, c.name)) for s in fp8_schemes() for c in CASES),
)


@lru_cache(maxsize=16)
def designed_case_data(scheme_name: str, case_name: str) -> GoldenData:
    """A designed case's tensors as its golden would hold them, built here from the seeds
    (`build_loading_golden`, which computes its reference with the reference quantizer)."""
    return build_loading_golden(scheme_name, case_name)


# ------------------------------------------------------------------ on-disk layouts
# How a fused case's checkpoint is stored (`LoadingParams.layout`): each logical shard on
# its own with its own scales (the case as built; "" in test ids), or the layer fused on
# disk, one tensor with one set of scales (`fused_on_disk`).
PER_SHARD = ""
FUSED_ON_DISK = "fused_on_disk"
LAYOUTS: tuple[str, ...] = (PER_SHARD, FUSED_ON_DISK)
# The name a fused layer's one tensor has on disk, by its logical shards' names (others:
# their names' stems joined, as gate/up gives gate_up_proj).
FUSED_NAMES: dict[tuple[str, ...], str] = {("q_proj", "k_proj", "v_proj"): "qkv_proj"}


def _fused_name(names: tuple[str, ...]) -> str:
    return FUSED_NAMES.get(names) or "_".join(n.removesuffix("_proj") for n in names) + "_proj"


def fused_on_disk(ckpt: LinearCheckpoint) -> LinearCheckpoint:
    """The same fused layer as a tool that writes it fused stores it: one tensor of every
    shard's rows, one set of scales, the logical shards listed.

    Per-tensor: one scale, the largest shard scale, every other shard requantized to it with
    the reference quantizer (the shard that has it keeps its codes); other granularities:
    every row or block keeps its codes and scale (blocks never straddle shards: widths are
    whole blocks). Static input scales: one, the largest (the shards share their input).
    """
    if not ckpt.fused:
        raise ValueError(f"{ckpt.source}: an unfused layer has no fused on-disk layout")
    spec = ckpt.scheme.weight
    k = int(ckpt.shards[0].weight.shape[1])
    if spec.block == (WHOLE, WHOLE):
        scale = torch.stack(
            [
                scale_values(s.weight_scale).reshape(())
                for s in ckpt.shards
                if s.weight_scale is not None
            ]
        ).max()
        grid = scale.reshape(1, 1)
        parts = [
            quantize(ckpt.dequantize_shard(i), spec, grid).codes
            if s.width
            else torch.zeros(0, k, dtype=torch.uint8)
            for i, s in enumerate(ckpt.shards)
        ]
        weight_scale = scale.reshape(())
    else:
        parts = [ckpt.shard_codes(s) for s in ckpt.shards]
        cols = scale_grid(spec, (1, k))[1]
        scales = [
            scale_values(s.weight_scale).reshape(-1, cols)
            for s in ckpt.shards
            if s.weight_scale is not None
        ]
        weight_scale = torch.cat(scales, dim=0)
        if spec.block == (1, WHOLE):
            weight_scale = weight_scale.reshape(-1, 1)
    inputs = [s.input_scale for s in ckpt.shards if s.input_scale is not None]
    names = tuple(s.name for s in ckpt.shards)
    codes = torch.cat(parts, dim=0)
    shard = Shard(
        _fused_name(names),
        int(codes.shape[0]),
        codes.view(get_format(spec.format).to_torch_dtype()),
        stored_scale(weight_scale, spec),
        torch.stack(inputs).max().reshape(()) if inputs else None,
    )
    logical = tuple((s.name, s.width) for s in ckpt.shards)
    return replace(ckpt, shards=(shard,), logical=logical, source=f"{ckpt.source} (fused on disk)")


def _as_built(ckpt: LinearCheckpoint) -> LinearCheckpoint:
    return ckpt


LAYOUT_BUILDERS: dict[str, Callable[[LinearCheckpoint], LinearCheckpoint]] = {
    PER_SHARD: _as_built,
    FUSED_ON_DISK: fused_on_disk,
}


def checkpoint_in_layout(ckpt: LinearCheckpoint, layout: str) -> LinearCheckpoint:
    """``ckpt`` stored in ``layout`` (one of `LAYOUTS`)."""
    return LAYOUT_BUILDERS[layout](ckpt)


# ------------------------------------------------------------------- suite params
@dataclass(frozen=True)
class LoadingParams(Case):
    """One suite parameter: scheme x case x platform flavour (x loader, path, bias)."""

    SUITE = "loading"
    ID = ("scheme", "case", "flavour", "loader", "path", "bias_id", "layout")
    RECORD = (
        "scheme",
        "case",
        "flavour",
        "loader=loader_or_none",
        "path=path_or_none",
        "bias",
        "layout=layout_name",
    )
    FINDING_SUITE = "loading"
    GOLDEN = GOLDEN_ENTRY

    scheme: str
    case: str
    flavour: str
    loader: str = ""
    path: str = ""
    bias: bool = True
    layout: str = PER_SHARD  # the checkpoint's on-disk layout (`LAYOUTS`)

    @property
    def layout_name(self) -> str:
        return self.layout or "per_shard"

    @property
    def bias_id(self) -> str:
        """Bias is part of the id only where a path runs the layer."""
        return ("bias" if self.bias else "nobias") if self.path else ""

    @property
    def finding_case_name(self) -> str:
        return self.case

    def finding_fields(self) -> dict[str, object]:
        """The case's finding fields and the flavour loaded into (a loader's findings)."""
        return {**super().finding_fields(), "flavour": self.flavour}

    @property
    def loader_or_none(self) -> str | None:
        return self.loader or None

    @property
    def path_or_none(self) -> str | None:
        return self.path or None


def loading_params(
    loaders: tuple[str, ...] = ("",),
    paths: tuple[str, ...] = ("",),
    biases: tuple[bool, ...] = (True,),
    cases: tuple[LoadingCase, ...] = CASES,
    layouts: tuple[str, ...] = (PER_SHARD,),
) -> Iterator[LoadingParams]:
    """Every scheme x case x flavour (x loader, path, bias, layout); layouts other than
    per-shard for fused cases only (an unfused layer is stored one way)."""
    for scheme in fp8_schemes():
        for case in cases:
            for flavour in FLAVOURS:
                for loader in loaders:
                    for path in paths:
                        for bias in biases:
                            for layout in layouts:
                                if layout != PER_SHARD and len(case.shards) < 2:
                                    continue
                                yield LoadingParams(
                                    scheme, case.name, flavour, loader, path, bias, layout
                                )
