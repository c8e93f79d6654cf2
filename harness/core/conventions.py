"""Engine conventions: deliberate, documented departures from a scheme's reference definition.

Real engines do not all quantize the way the reference does (x / scale in float32, scales
from `harness.core.scales`, NaN scale for a non-finite MX block). Where an engine departs on
purpose and says so in its own source or docs, the departure is a *convention*: a named
variant of a `QuantSpec` (``spec.conventions``) that the reference quantizer implements, so
the suites compute what an engine following it must produce and hold it to that bit for bit.
A difference no declared convention explains is a finding, not a convention.

A convention may replace the values quantized (``source``: float32 x -> the float32 values
the engine actually receives, e.g. x rounded to bf16 for a kernel that takes bf16 only).
It changes one or more of three further steps, each a hook applied in registry order:
the scale (``scale``: amax, reference scale -> scale), the divisor the elements are divided
by (``divisor``), and whether elements are multiplied by a float32 reciprocal instead of
divided (``reciprocal``, with an optional ``reciprocal_hook`` on that reciprocal). A
convention may also lower the saturation bound (``clamp_max``) or break the element
rounding's ties otherwise than to even (``element_ties``, a tie rule of
`harness.core.formats.encode`). Two-level scales (NVFP4) have their own hooks: the value
rounded to a block scale (``two_level_block``), what elements are multiplied by
(``two_level_multiplier``), and whether a scaled -0 encodes as +0 (``unsigned_zero_codes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from harness.core.formats import get_format
from harness.core.scale_formats import E8M0, FP32
from harness.errors import QHarnessError

if TYPE_CHECKING:  # spec.py defines specs; this module only reads them
    from harness.core.spec import QuantSpec

ScaleHook = Callable[[torch.Tensor, torch.Tensor, "QuantSpec"], torch.Tensor]
TensorHook = Callable[[torch.Tensor], torch.Tensor]

_F32_MIN_NORMAL = 2.0**-126


@dataclass(frozen=True)
class Convention:
    """One named departure from the reference quantizer, and where it applies."""

    name: str
    description: str  # what differs, and which engines document doing it
    applies: Callable[[QuantSpec], bool]
    source: TensorHook | None = None  # float32 x -> the values the engine quantizes
    scale: ScaleHook | None = None  # (tile amax, reference scale, spec) -> scale used
    divisor: TensorHook | None = None  # scale -> the value elements are divided by
    reciprocal: bool = False  # elements * fp32(1 / divisor) instead of elements / divisor
    reciprocal_hook: TensorHook | None = None  # adjusts that reciprocal (given the divisor)
    clamp_max: Callable[[QuantSpec], float] | None = None
    # two-level scales: (block scales, global scale) -> what elements are multiplied by,
    # instead of being divided by block * global
    two_level_multiplier: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    # two-level scales: (block amax, global scale, spec) -> the float32 value rounded to the
    # block format, instead of (amax / qmax) / global
    two_level_block: Callable[[torch.Tensor, torch.Tensor, QuantSpec], torch.Tensor] | None = None
    unsigned_zero_codes: bool = False  # an element whose scaled value is +-0 gets code +0
    # single-level scales: a code of -0 (a value that rounds to zero keeps its sign) is +0
    positive_zero_codes: bool = False
    # an Inf in a block saturates it (a finite scale, the element max) instead of NaN
    saturates_inf_block: bool = False
    element_ties: str | None = None  # `encode`'s tie rule for the element codes


CONVENTIONS: dict[str, Convention] = {}


def register_convention(convention: Convention) -> Convention:
    if convention.name in CONVENTIONS:
        raise ValueError(f"convention {convention.name!r} registered twice")
    CONVENTIONS[convention.name] = convention
    return convention


class UnknownConventionError(QHarnessError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def get_convention(name: str) -> Convention:
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise UnknownConventionError(
            f"unknown convention {name!r}; known: {sorted(CONVENTIONS)}"
        ) from None


def with_conventions(spec: QuantSpec, names: Iterable[str]) -> QuantSpec:
    """``spec`` with those of ``names`` that apply to it (others are ignored), in effect."""
    chosen = [get_convention(n) for n in sorted(set(names))]
    applicable = frozenset(c.name for c in chosen if c.applies(spec))
    clamp = spec.clamp_max
    for c in chosen:
        if c.name in applicable and c.clamp_max is not None:
            clamp = c.clamp_max(spec)
    return replace(spec, conventions=spec.conventions | applicable, clamp_max=clamp)


def _active(spec: QuantSpec) -> list[Convention]:
    return [get_convention(n) for n in sorted(spec.conventions)]


def source_values(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """The float32 values an engine following the spec's conventions quantizes (x itself
    unless a convention says the engine receives them in another dtype)."""
    for c in _active(spec):
        if c.source is not None:
            x = c.source(x)
    return x


def apply_scale_conventions(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    for c in _active(spec):
        if c.scale is not None:
            scale = c.scale(amax, scale, spec)
    return scale


def two_level_multiplier(
    spec: QuantSpec,
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None:
    """The element multiplier a two-level convention in effect uses, or None (divide)."""
    hooks = [c.two_level_multiplier for c in _active(spec) if c.two_level_multiplier]
    return hooks[-1] if hooks else None


def two_level_block(
    spec: QuantSpec,
) -> Callable[[torch.Tensor, torch.Tensor, QuantSpec], torch.Tensor] | None:
    """The block-scale quotient a two-level convention in effect uses, or None (the
    reference's ``(amax / qmax) / global``)."""
    hooks = [c.two_level_block for c in _active(spec) if c.two_level_block]
    return hooks[-1] if hooks else None


def saturates_inf_block(spec: QuantSpec) -> bool:
    """Whether a convention in effect gives a block holding +-Inf a finite scale and
    saturated codes instead of the NaN the reference gives it."""
    return any(c.saturates_inf_block for c in _active(spec))


def unsigned_zero_codes(spec: QuantSpec) -> bool:
    """Whether a convention in effect encodes a scaled value of -0 as +0."""
    return any(c.unsigned_zero_codes for c in _active(spec))


def drop_negative_zero_codes(codes: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """``codes`` with every -0 code made +0 where a convention in effect says so (formats
    whose -0 code is NaN, the FNUZ ones, have no -0 to drop)."""
    fmt = get_format(spec.format)
    if not fmt.has_negative_zero or not any(c.positive_zero_codes for c in _active(spec)):
        return codes
    return torch.where(codes == fmt.sign_bit, torch.zeros_like(codes), codes)


def scale_elements(x: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """x / scale in float32 (the reference), or what the spec's conventions do instead."""
    active = _active(spec)
    divisor = scale
    for c in active:
        if c.divisor is not None:
            divisor = c.divisor(divisor)
    if not any(c.reciprocal for c in active):
        return x / divisor
    reciprocal = torch.reciprocal(divisor)
    for c in active:
        if c.reciprocal_hook is not None:
            reciprocal = c.reciprocal_hook(reciprocal)
    return x * reciprocal


def element_ties(spec: QuantSpec) -> str:
    """How the element codec breaks ties under the spec's conventions ("even" if none says)."""
    rules = {c.element_ties for c in _active(spec) if c.element_ties is not None}
    if len(rules) > 1:
        raise ValueError(f"conventions of {spec} disagree on element ties: {sorted(rules)}")
    return next(iter(rules), "even")


# --------------------------------------------------------------------- the registry
def _fp32_scales(spec: QuantSpec) -> bool:
    return spec.scale_fmt is FP32


def _bound_1_over_512max(spec: QuantSpec) -> torch.Tensor:
    # float32: 1 / (qmax * 512), as the engine computes it (qmax * 512 is exact)
    return torch.tensor(1.0, dtype=torch.float32) / torch.tensor(
        spec.qmax * 512, dtype=torch.float32
    )


def _min_scale_512(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # a zero tile gets the bound
    return torch.maximum(amax.float() / spec.qmax, _bound_1_over_512max(spec))


register_convention(
    Convention(
        "min_scale_1_over_512max",
        "computed FP8 scales are bounded from below at 1 / (fp8_max * 512), so a tile with a "
        "tiny amax gets a larger scale than amax / fp8_max (vLLM's dynamic per-token quant "
        "and its QuantFP8 native path; a zero tile gets that bound, not 1)",
        _fp32_scales,
        scale=_min_scale_512,
    )
)


_FP8 = frozenset({"e4m3fn", "e4m3fnuz"})


def _ue8m0_fp8(spec: QuantSpec) -> bool:
    return spec.scale_fmt is E8M0 and spec.scale_rounding == "rceil" and spec.format in _FP8


def _power_of_two_at_or_above(s: torch.Tensor) -> torch.Tensor:
    # exact: a float32 with a non-zero mantissa moves up one exponent (the rceil rule)
    return torch.exp2(torch.ceil(torch.log2(s.double()))).float()


def _ue8m0_min_scale_512(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # the power of two at or above 1 / (qmax * 512): the bound taken before rounding up
    return torch.maximum(scale, _power_of_two_at_or_above(_bound_1_over_512max(spec)))


register_convention(
    Convention(
        "ue8m0_min_scale_1_over_512max",
        "power-of-two (UE8M0) FP8 scales are bounded from below at 1 / (fp8_max * 512) before "
        "they are rounded up to a power of two, so a tile with a tiny amax gets 2^-17 "
        "(e4m3fn), not 2^ceil(log2(amax / fp8_max)) (vLLM's QuantFP8 and per-token-group "
        "quantizers with use_ue8m0: their floor, applied ahead of the rounding as "
        "vllm-project/vllm#58032 restores; vLLM 0.32 applies it after, a finding)",
        _ue8m0_fp8,
        scale=_ue8m0_min_scale_512,
    )
)


def _ue8m0_floor_after_rounding(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    # the power-of-two scale, then the bound 1 / (qmax * 512) itself (not a power of two)
    return torch.maximum(scale, _bound_1_over_512max(spec))


register_convention(
    Convention(
        "ue8m0_floor_after_rounding",
        "power-of-two (UE8M0) FP8 scales are rounded up first and bounded at 1 / (fp8_max * "
        "512) after, so a tiny tile gets 1 / 229376, not a power of two. Not declared by any "
        "adapter: vLLM 0.32 does this and upstream fixes it (vllm-project/vllm#58032), so it "
        "is a finding; kept as the rule that says exactly what that finding does",
        _ue8m0_fp8,
        scale=_ue8m0_floor_after_rounding,
    )
)


def _zero_scale_as_eps(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # amax / qmax as computed in float32; where it is 0 (a zero tile, or one whose amax / qmax
    # underflows) the observer puts float32 eps (2^-23)
    raw = amax.float() / spec.qmax
    return torch.where(raw == 0, torch.full_like(raw, 2.0**-23), raw)


register_convention(
    Convention(
        "zero_scale_as_fp32_eps",
        "a computed FP8 scale of 0 becomes float32 eps (2^-23): a zero tile gets 2^-23, not "
        "1, and a non-zero tile whose amax / fp8_max underflows float32 (amax at most "
        "fp8_max * 2^-150) quantizes to zeros instead of to the smallest positive scale "
        "(Quark's min-max observers: 'eps: Small epsilon value to prevent division by zero', "
        "scale.masked_fill(scale == 0.0, eps))",
        _fp32_scales,
        scale=_zero_scale_as_eps,
    )
)

register_convention(
    Convention(
        "reciprocal_scale",
        "elements are multiplied by the float32 reciprocal of the scale instead of divided "
        "by it; the two roundings move a few codes that sit on a tie (vLLM's FP8 quant "
        "kernels and QuantFP8 native path)",
        _fp32_scales,
        reciprocal=True,
    )
)


_AMAX_FLOOR = 1e-10  # as float32, the constant aiter's kernel compares with


def _amax_floor_1e_10(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # float32: max(amax, 1e-10) / qmax, as the kernel computes it; a zero tile gets
    # 1e-10 / qmax, not 1 (its codes are zero either way)
    floor = torch.tensor(_AMAX_FLOOR, dtype=torch.float32)
    return torch.maximum(amax.float(), floor) / spec.qmax


register_convention(
    Convention(
        "amax_floor_1e-10",
        "a tile's amax is bounded from below at 1e-10 (float32) before the scale amax / "
        "fp8_max is taken, so a zero or tiny tile gets 1e-10 / fp8_max, not 1 or its own "
        "amax / fp8_max (aiter's fused FP8 group quant, _fp8_quant_op: "
        "m = tl.maximum(tl.max(tl.abs(x), axis=-1), 1e-10))",
        _fp32_scales,
        scale=_amax_floor_1e_10,
    )
)


def _floored_amax_times_reciprocal(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # float32: max(amax, 1e-10) * fp32(1 / qmax), the reciprocal rounded to float32 first
    floor = torch.tensor(_AMAX_FLOOR, dtype=torch.float32)
    reciprocal = torch.tensor(1.0 / spec.qmax, dtype=torch.float32)
    return torch.maximum(amax.float(), floor) * reciprocal


def _amax_floor_times_reciprocal(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    return _floored_amax_times_reciprocal(amax, spec)


register_convention(
    Convention(
        "amax_floor_1e-10_times_reciprocal_max",
        "a tile's amax is bounded from below at 1e-10 (float32) and multiplied by the float32 "
        "reciprocal of fp8_max instead of divided by fp8_max, so a zero or tiny tile gets "
        "1e-10 * fp32(1 / fp8_max) and some scales differ from amax / fp8_max in the last "
        "bit (vLLM's Triton per-token-group FP8 quant: _absmax * (1.0 / fp8_max), 'Use "
        "multiply-by-reciprocal instead of division to match PyTorch's tensor/scalar "
        "division precision')",
        _fp32_scales,
        scale=_amax_floor_times_reciprocal,
    )
)


_UE8M0_SCALE_FLOOR = 1e-10  # as float32: vLLM's compiled op's fmaxf(fabsf(y_s), 1e-10f)


def _ue8m0_scale_floor(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    raw = _floored_amax_times_reciprocal(amax, spec)
    floor = torch.tensor(_UE8M0_SCALE_FLOOR, dtype=torch.float32)
    return _power_of_two_at_or_above(torch.maximum(raw, floor))


register_convention(
    Convention(
        "ue8m0_scale_floor_1e-10",
        "power-of-two (UE8M0) FP8 scales are max(amax, 1e-10) * fp32(1 / fp8_max) bounded at "
        "1e-10 (float32) and then rounded up to a power of two, so a zero or tiny tile gets "
        "2^-33, not 2^ceil(log2(amax / fp8_max)) (vLLM's compiled per-token-group quant: "
        "exp2f(ceilf(log2f(fmaxf(fabsf(y_s), 1e-10f)))); its Triton kernels with the floor "
        "vllm-project/vllm#53346 adds; the amax floor and the reciprocal as in "
        "amax_floor_1e-10_times_reciprocal_max)",
        _ue8m0_fp8,
        scale=_ue8m0_scale_floor,
    )
)


def _ue8m0_no_scale_floor(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    return _power_of_two_at_or_above(_floored_amax_times_reciprocal(amax, spec))


register_convention(
    Convention(
        "ue8m0_no_scale_floor",
        "power-of-two (UE8M0) FP8 scales are max(amax, 1e-10) * fp32(1 / fp8_max) rounded up "
        "to a power of two with no floor on the scale, so a zero or tiny tile gets 2^-42 "
        "(e4m3fn), not 2^-33. Not declared by any adapter: vLLM 0.32's Triton per-token-group "
        "kernels do this and upstream calls it a bug (vllm-project/vllm#53339, fix #53346), "
        "so it is a finding; kept as the rule that says exactly what that finding does",
        _ue8m0_fp8,
        scale=_ue8m0_no_scale_floor,
    )
)


def _scale_floor_fp32_min_normal(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    # float32: max(amax / qmax, 2^-126); a zero tile gets 2^-126 (its codes are zero either
    # way), a tile whose amax / qmax is a float32 subnormal or 0 gets 2^-126 too
    return torch.clamp(amax.float() / spec.qmax, min=_F32_MIN_NORMAL)


register_convention(
    Convention(
        "scale_floor_fp32_min_normal",
        "a computed FP8 scale amax / fp8_max is bounded from below at float32's smallest "
        "normal 2^-126, so a zero tile gets 2^-126, not 1, and a tile of float32 subnormals "
        "whose amax / fp8_max is below 2^-126 gets 2^-126 (its elements then round to zero "
        "or the format's subnormals) instead of its own subnormal scale (torchao's "
        "quant_primitives: 'eps (Optional[float]): minimum scale, if not provided, default "
        "to eps of input.dtype', implemented as torch.clamp(scale, min=torch.finfo("
        "input.dtype).smallest_normal); the float8 scale's fix proposed as pytorch/ao#4762 "
        "applies the same floor)",
        _fp32_scales,
        scale=_scale_floor_fp32_min_normal,
    )
)


def _unguarded_fp32_scale(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # amax / qmax with no special case: 0 where the tile is zero or the quotient underflows
    return amax.float() / spec.qmax


register_convention(
    Convention(
        "fp32_scale_zero_unguarded",
        "the scale is amax / fp8_max with no lower bound, so a zero tile (or one whose "
        "quotient underflows float32) gets scale 0 and its elements divide as 0 / 0 = NaN "
        "(a non-zero element as x / 0 = +-Inf, which saturates). Not declared by any "
        "adapter: torchao 0.18's _choose_scale_float8 does this and upstream's tracker calls "
        "it a bug (pytorch/ao#4713), so it is a finding; kept as the rule that says exactly "
        "what it does",
        _fp32_scales,
        scale=_unguarded_fp32_scale,
    )
)


def _is_fnuz(spec: QuantSpec) -> bool:
    return spec.format == "e4m3fnuz" and (spec.clamp_max is None or spec.clamp_max > 224)


register_convention(
    Convention(
        "fnuz_clamp_224",
        "e4m3fnuz quantization saturates at 224 instead of 240 and scales are amax / 224 "
        "(vLLM on ROCm gfx94x)",
        _is_fnuz,
        clamp_max=lambda spec: 224.0,
    )
)


# ------------------------------------------------------------------------ MX scales
def _e8m0(spec: QuantSpec) -> bool:
    return spec.scale_fmt is E8M0


def _e8m0_from_exponent(spec: QuantSpec) -> bool:
    return spec.scale_fmt is E8M0 and spec.scale_rounding in ("floor", "even", "ceil")


def _inf_amax_as_2pow128(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # An Inf amax has float32 exponent field 255, read as 2^128 like any other exponent:
    # scale exponent 128 - emax (ceil adds nothing: Inf's mantissa is 0). NaN keeps 0xFF.
    emax = get_format(spec.format).emax
    finite_scale = torch.tensor(2.0 ** (128 - emax), dtype=torch.float32)
    return torch.where(torch.isinf(amax), finite_scale, scale)


register_convention(
    Convention(
        "mx_inf_amax_as_2pow128",
        "an MX block whose amax is Inf gets the finite scale 2^(128 - emax) (Inf's float32 "
        "exponent field read as 2^128) instead of the NaN scale 0xFF; its Inf elements "
        "saturate to the element max (torchao to_mx floor/even/ceil)",
        _e8m0_from_exponent,
        scale=_inf_amax_as_2pow128,
    )
)


def _inf_amax_max_scale(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    return torch.where(torch.isinf(amax), torch.tensor(2.0**127), scale)


register_convention(
    Convention(
        "mx_inf_amax_scale_0xfe",
        "an MX block whose amax is Inf gets the largest finite scale 2^127 (code 0xFE) instead "
        "of the NaN scale 0xFF (TransformerEngine's and torchao's rceil cast)",
        lambda spec: _e8m0(spec) and spec.scale_rounding == "rceil",
        scale=_inf_amax_max_scale,
    )
)

register_convention(
    Convention(
        "mx_min_scale_divides_as_2pow-126",
        "the smallest E8M0 scale 2^-127 (a float32 subnormal) is stored as code 0x00 but the "
        "elements are divided by 2^-126, the smallest normal float32 (torchao to_mx "
        "floor/even/ceil, documented there as a workaround for compilers flushing 2^-127)",
        _e8m0_from_exponent,
        divisor=lambda scale: torch.clamp(scale, min=_F32_MIN_NORMAL),
    )
)


# ------------------------------------------------------------------- NVFP4 scales
def _e4m3_blocks(spec: QuantSpec) -> bool:
    return spec.scale_fmt.element == "e4m3fn"  # E4M3 block scales, one or two levels


_E4M3_MIN_NORMAL = 2.0**-6
_E4M3_MAX = 448.0


def _min_normal_block_scale(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    # clamping the quotient at 2^-6 before the RNE cast equals clamping its rounding after
    return torch.where(torch.isnan(scale), scale, torch.clamp(scale, min=_E4M3_MIN_NORMAL))


register_convention(
    Convention(
        "e4m3_block_scale_min_normal",
        "E4M3 block scales are clamped from below at E4M3's smallest normal 2^-6 before the "
        "cast, so no block scale is subnormal or zero (torchao NVFP4Tensor.to_nvfp4: "
        "clamp(min=torch.finfo(float8_e4m3fn).tiny)). Not declared by any adapter: "
        "upstream's tracker calls it a bug (pytorch/pytorch#179111, against torchao's "
        "nvfp4_tensor.py), so it is a finding; kept as the rule that says exactly what it does",
        _e4m3_blocks,
        scale=_min_normal_block_scale,
    )
)


def _inf_block_saturates(amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    return torch.where(torch.isinf(amax), torch.full_like(scale, _E4M3_MAX), scale)


register_convention(
    Convention(
        "e4m3_inf_block_scale_448",
        "an E4M3-scaled block whose amax is Inf gets the largest scale 448 (the clamp before "
        "the cast saturates Inf) instead of the NaN scale; its Inf elements saturate to the "
        "element max (torchao NVFP4Tensor.to_nvfp4, vLLM nvfp4_emulation_utils)",
        _e4m3_blocks,
        scale=_inf_block_saturates,
        saturates_inf_block=True,
    )
)


def _reciprocal_of_combined(block: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    # (1 / g) / block; a block whose scale rounded to zero holds only +-0 (its elements
    # times 0), as the reference's zero-scale block does, not x * Inf
    m = (1.0 / g) / block
    return torch.where(block == 0, torch.zeros_like(m), m)


register_convention(
    Convention(
        "two_level_reciprocal_scale",
        "elements are multiplied by fp32((1 / global) / block) instead of divided by "
        "fp32(block * global); the roundings move codes near ties (torchao "
        "NVFP4Tensor.to_nvfp4, to match its triton kernel). A block scale of zero keeps "
        "the reference's meaning (its elements are +-0)",
        lambda spec: spec.scale_fmt.per_tensor_level,
        two_level_multiplier=_reciprocal_of_combined,
    )
)


def _reciprocal_zero_as_1e8(x: torch.Tensor) -> torch.Tensor:
    # vLLM's get_reciprocal on tensors: 1 / (x + (x == 0) * 1e8), so 0 -> fp32(1e-8)
    return 1.0 / (x + (x == 0) * 1e8)


def _inverted_global_block(amax: torch.Tensor, g: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    # g_inv * (amax * (1 / qmax)), g_inv = fp32(1 / g): the per-tensor scale as stored
    return (1.0 / g.float()) * (amax.float() * (1.0 / spec.qmax))


def _inverted_global_multiplier(block: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    # 1 / (s * (1 / g_inv)), each reciprocal taking 0 to 1e-8
    g_inv = 1.0 / g.float()
    return _reciprocal_zero_as_1e8(block * _reciprocal_zero_as_1e8(g_inv))


register_convention(
    Convention(
        "two_level_inverted_global",
        "the per-tensor scale is held inverted, g_inv = fp32(1 / g) (compressed-tensors "
        "checkpoints store it so); block scales are E4M3(g_inv * (amax * fp32(1 / 6))) "
        "instead of E4M3((amax / 6) / g), elements are multiplied by "
        "1 / (s * (1 / g_inv)) with 1 / 0 read as 1e-8, and a scaled value of -0 encodes "
        "as +0 (its sign comes from torch.sign); a global below 2^-128 makes g_inv Inf and "
        "every element code 0 (vLLM nvfp4_emulation_utils.ref_nvfp4_quant, cast_to_fp4)",
        lambda spec: spec.scale_fmt.per_tensor_level,
        two_level_block=_inverted_global_block,
        two_level_multiplier=_inverted_global_multiplier,
        unsigned_zero_codes=True,
    )
)


def _through_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()  # round to nearest even, as torch's cast does


register_convention(
    Convention(
        "bf16_source",
        "the kernel takes bfloat16 (or float16) sources only, so float32 input is rounded to "
        "bf16 (nearest even) first and the bf16 values are quantized: a float32 value between "
        "two bf16 values may get another code, and a block amax another scale, than the "
        "float32 value would (vLLM mxfp4_utils._downcast_to_mxfp: static_assert src_dtype "
        "bfloat16 or float16; mxfp4_quantize: 'Quantize a bf16/fp16 tensor to MXFP4')",
        lambda spec: True,
        source=_through_bf16,
    )
)

register_convention(
    Convention(
        "fp4_ties_away",
        "FP4 (e2m1) elements round to nearest with ties away from zero instead of to even "
        "(0.25 -> 0.5, 1.25 -> 1.5, 2.5 -> 3, 5 -> 6), as aiter 0.1.7's _mxfp4_quant_op "
        "does. Not declared by any adapter: upstream calls it a bug (ROCm/aiter#974, fixed "
        "by #975), so it is a finding (docs/CONVENTIONS.md); kept so that a test can show "
        "the finding is exactly this tie rule",
        lambda spec: spec.format == "e2m1",
        element_ties="away",
    )
)

register_convention(
    Convention(
        "negative_zero_code_positive",
        "an element whose scaled value is -0 (a -0 input, or a negative value that rounds to "
        "zero) gets the code of +0. Not declared by any adapter: the reference keeps the "
        "sign, and a quantizer that drops it is a finding (Quark 0.13's real_quantize_mxfp); "
        "kept as the rule that says exactly what that finding does, so a known-finding "
        "xfail covers only those codes",
        lambda spec: not spec.scale_fmt.per_tensor_level,
        positive_zero_codes=True,
    )
)


def _rceil_mode(spec: QuantSpec) -> bool:
    return spec.scale_fmt is E8M0 and spec.scale_rounding == "rceil"


def _rceil_by_float32_log2(
    amax: torch.Tensor, scale: torch.Tensor, spec: QuantSpec
) -> torch.Tensor:
    # exponent ceil(log2(fp32(amax / max))) clamped to E8M0's [-127, 127]; non-finite amax
    # keeps the scale the other rules give it
    descale = amax.float() / get_format(spec.format).max_finite
    e = torch.clamp(torch.ceil(torch.log2(descale)), min=-127, max=127)
    return torch.where(torch.isfinite(amax), torch.exp2(e), scale)


register_convention(
    Convention(
        "rceil_float32_log2",
        "the RCEIL exponent is ceil(log2(amax / max)) taken in float32, where log2 of a value "
        "just above 2^k rounds to k, so such a block gets 2^k and saturates instead of 2^(k+1). "
        "Not declared by any adapter: torchao 0.18's eager _to_mx_rceil does this and torchao "
        "main changed it (pytorch/ao#4725), so it is a finding; kept as the rule that says "
        "exactly what it does",
        _rceil_mode,
        scale=_rceil_by_float32_log2,
    )
)


def _code0_divides_by_one(scale: torch.Tensor) -> torch.Tensor:
    return torch.where(scale == 2.0**-127, torch.ones_like(scale), scale)


register_convention(
    Convention(
        "e8m0_code0_divides_by_one",
        "a block whose E8M0 scale is 2^-127 (code 0x00) has its elements multiplied by 1 "
        "instead of 2^127. Not declared by any adapter: torchao 0.18's eager _to_mx_rceil does "
        "this and torchao main changed it (pytorch/ao#4725), so it is a finding; kept as the "
        "rule that says exactly what it does",
        _rceil_mode,
        divisor=_code0_divides_by_one,
    )
)
