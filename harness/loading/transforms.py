"""Weight transforms engines apply after loading a checkpoint, as small pure functions.

Each transform maps a `LoadState` (the fused tensors of one linear layer plus what is known
about them) to a new one and never edits its input in place. Loaders (harness.loading.loaders) are
ordered tuples of these functions. The state carries the runtime scheme, whose element
formats always describe the codes as they are at that point: a transform that changes the
format of the codes changes the scheme with them, so every later step decodes and encodes
in the right format whatever the order. docs/LOADING.md derives which orders commute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from harness.core.formats import decode, get_format
from harness.core.quantize import quantize, scale_grid
from harness.core.schemes import WHOLE, QuantSpec, Scheme
from harness.errors import QHarnessError

# Value a scale slot holds until a shard's scale is loaded into it (as engines initialize
# fused per-shard scale parameters). Any slot that is not finite and positive counts as
# unloaded, so the sentinel survives being doubled (float32 min * 2 = -inf) or being NaN.
SCALE_SLOT_SENTINEL = torch.finfo(torch.float32).min

# e4m3fn 0x80 is -0; in e4m3fnuz the same code is NaN.
NEGATIVE_ZERO_CODE = 0x80


class LoadError(QHarnessError, ValueError):
    """A transform's precondition does not hold; the message names the step and the fix."""


@dataclass(frozen=True)
class LoadState:
    """One linear layer between loading steps. Shards are concatenated along N."""

    scheme: Scheme  # runtime scheme: its formats describe `codes` and activations right now
    codes: torch.Tensor  # uint8 [N, K]
    weight_scale: torch.Tensor  # per-tensor: one slot per shard [S]; per-row: [N]; else grid
    input_scale: torch.Tensor | None  # static activations: one slot per shard [S], later (1, 1)
    bias: torch.Tensor | None  # float32 [N]
    widths: tuple[int, ...]  # logical width of each shard; sum == N
    target_format: str  # the platform's FP8 flavour ("e4m3fn" or "e4m3fnuz")
    unloaded: tuple[int, ...] = ()  # shards whose scale slot was never loaded (flagged)

    @property
    def offsets(self) -> tuple[int, ...]:
        starts = [0]
        for w in self.widths:
            starts.append(starts[-1] + w)
        return tuple(starts)


Transform = Callable[[LoadState], LoadState]


def loaded_slots(slots: torch.Tensor) -> torch.Tensor:
    """Which scale slots hold a loaded scale: finite and positive (sentinels are neither)."""
    return torch.isfinite(slots) & (slots > 0)


# ----------------------------------------------------------- FP8 flavour conversion
# The same e4m3 bits mean twice as much in e4m3fn (bias 7) as in e4m3fnuz (bias 8), except
# the codes one flavour spends on NaN: 0x7F/0xFF (fn NaN, fnuz +-240) and 0x80 (fn -0,
# fnuz NaN). Converting a code keeps its value when the scale moves by the same factor.
E4M3FN_PER_E4M3FNUZ = 2.0  # value of a code in e4m3fn / its value in e4m3fnuz
FNUZ_240_CODES = (0x7F, 0xFF)  # +-240 in e4m3fnuz; NaN in e4m3fn


def _moved_spec(spec: QuantSpec, fmt: str, factor: float) -> QuantSpec:
    """The same quantizer in ``fmt``, whose codes mean ``factor`` times as much.

    Saturation moves with the values (448 in e4m3fn is 224 in e4m3fnuz and back), so an
    out-of-range value saturates to the same real number in both flavours and dynamic
    scales (amax / bound) move by exactly the scale factor.
    """
    bound = spec.qmax * factor
    return replace(
        spec, format=fmt, clamp_max=None if bound == get_format(fmt).max_finite else bound
    )


def _reinterpret(state: LoadState, codes: torch.Tensor, fmt: str, factor: float) -> LoadState:
    """Relabel ``codes`` as ``fmt`` (each code worth ``factor`` times as much): scales and
    the runtime scheme's bounds move by 1/factor and factor, so every value is kept."""
    act = state.scheme.activation
    scheme = replace(
        state.scheme,
        weight=_moved_spec(state.scheme.weight, fmt, factor),
        activation=None if act is None else _moved_spec(act, fmt, factor),
    )
    inputs = state.input_scale
    return replace(
        state,
        scheme=scheme,
        codes=codes,
        weight_scale=_scale_loaded(state.weight_scale, 1 / factor),
        input_scale=None if inputs is None else _scale_loaded(inputs, 1 / factor),
    )


def _scale_loaded(scale: torch.Tensor, factor: float) -> torch.Tensor:
    """Multiply loaded scales by a power of two (exact); unloaded slots keep their value."""
    return torch.where(loaded_slots(scale), scale * factor, scale)


def _require_format(state: LoadState, fmt: str, step: str) -> None:
    if state.scheme.weight.format != fmt:
        raise LoadError(
            f"{step}: weight codes are {state.scheme.weight.format}, not {fmt} (applied "
            "twice, or to a checkpoint in another format?)"
        )


def normalize_e4m3fn_to_e4m3fnuz(state: LoadState) -> LoadState:
    """Turn e4m3fn codes into e4m3fnuz codes for ROCm gfx94x, exactly.

    The same bits decode to half the value in e4m3fnuz (bias 8 vs 7), so weight and input
    scales are doubled; 0x80 is -0 in e4m3fn but NaN in e4m3fnuz, so it becomes 0x00 first.
    Every other finite e4m3fn code keeps its meaning (NaN codes are rejected at reading).
    Activations of the runtime scheme switch to e4m3fnuz with the halved saturation bound
    (448 -> 224), so static and dynamic activation scales give the same real values.
    """
    _require_format(state, "e4m3fn", "normalize_e4m3fn_to_e4m3fnuz")
    codes = torch.where(state.codes == NEGATIVE_ZERO_CODE, 0, state.codes).to(torch.uint8)
    return _reinterpret(state, codes, "e4m3fnuz", 1 / E4M3FN_PER_E4M3FNUZ)


def normalize_e4m3fnuz_to_e4m3fn(state: LoadState) -> LoadState:
    """Turn e4m3fnuz codes into e4m3fn codes (an e4m3fnuz checkpoint on an e4m3fn GPU).

    The reverse of `normalize_e4m3fn_to_e4m3fnuz`: codes mean twice as much, scales halve.
    Exact only for checkpoints that saturate at 224: e4m3fnuz's 240 (0x7F) would be 480 at
    half the scale, beyond e4m3fn's 448, and is NaN in e4m3fn. Such codes are refused
    (`conversion_problem` refuses schemes that may produce them).
    """
    _require_format(state, "e4m3fnuz", "normalize_e4m3fnuz_to_e4m3fn")
    n_240 = int(sum(int((state.codes == c).sum()) for c in FNUZ_240_CODES))
    if n_240:
        raise LoadError(
            f"normalize_e4m3fnuz_to_e4m3fn: {n_240} weight codes are +-240 (0x7F/0xFF), which "
            "have no e4m3fn image at half the scale; load this checkpoint on an e4m3fnuz "
            "platform or requantize it with a 224 bound"
        )
    return _reinterpret(state, state.codes, "e4m3fn", E4M3FN_PER_E4M3FNUZ)


def _identity(state: LoadState) -> LoadState:
    return state


# (checkpoint weight format, platform format) -> exact conversion of the codes.
FLAVOUR_CONVERSIONS: dict[tuple[str, str], tuple[Transform, float]] = {
    ("e4m3fn", "e4m3fn"): (_identity, 1.0),
    ("e4m3fnuz", "e4m3fnuz"): (_identity, 1.0),
    ("e4m3fn", "e4m3fnuz"): (normalize_e4m3fn_to_e4m3fnuz, 1 / E4M3FN_PER_E4M3FNUZ),
    ("e4m3fnuz", "e4m3fn"): (normalize_e4m3fnuz_to_e4m3fn, E4M3FN_PER_E4M3FNUZ),
}


def conversion_problem(scheme: Scheme, target_format: str) -> str | None:
    """Why ``scheme`` checkpoints cannot be converted exactly to ``target_format`` (or None).

    A conversion multiplies the saturation bounds by the code value factor; the moved bound
    must be a value of the target format (240 * 2 = 480 is not an e4m3fn value).
    """
    entry = FLAVOUR_CONVERSIONS.get((scheme.weight.format, target_format))
    if entry is None:
        return f"no conversion of {scheme.weight.format} checkpoints to {target_format}"
    _, factor = entry
    target_max = get_format(target_format).max_finite
    for role, spec in (("weight", scheme.weight), ("activation", scheme.activation)):
        if spec is not None and spec.qmax * factor > target_max:
            return (
                f"{scheme.name}: {role} saturates at {spec.qmax:g} {spec.format}, which is "
                f"{spec.qmax * factor:g} in {target_format}, beyond its {target_max:g}; no exact "
                "conversion"
            )
    return None


def normalize_to_platform_fp8(state: LoadState) -> LoadState:
    """Bring the codes into the platform's FP8 flavour (a table lookup; identity if equal)."""
    problem = conversion_problem(state.scheme, state.target_format)
    if problem is not None:
        raise LoadError(f"normalize_to_platform_fp8: {problem}")
    convert, _ = FLAVOUR_CONVERSIONS[(state.scheme.weight.format, state.target_format)]
    return convert(state)


# ------------------------------------------------------------ fused shard scales
def requantize_with_max_scale(state: LoadState) -> LoadState:
    """Give a fused per-tensor layer one weight scale: the largest of its shards' scales.

    Kernels take one per-tensor scale, but each shard of a fused QKV or gate/up layer was
    quantized with its own. Each shard is dequantized with its own scale and requantized
    with the max, in the codes' current format (so this commutes with flavour conversion).
    A shard whose scale equals the max keeps its values bit for bit; the others lose bits
    (a larger scale means a coarser grid). Every zero is stored as +0, the zero code both
    flavours share, so the result does not depend on whether a flavour conversion ran
    before or after. Zero-width shards are skipped. Slots never
    loaded are excluded from the max and their shards flagged in ``unloaded`` (their codes
    become 0: there is no scale to read them with). Other granularities pass through.
    """
    spec = state.scheme.weight
    if spec.block != (WHOLE, WHOLE):
        return state
    slots = state.weight_scale.reshape(-1)
    if slots.numel() != len(state.widths):
        raise LoadError(
            f"requantize_with_max_scale: {slots.numel()} weight scale slots for "
            f"{len(state.widths)} shards; it must run before the scale is reshaped to one"
        )
    loaded = loaded_slots(slots)
    flagged = tuple(i for i in range(len(state.widths)) if not bool(loaded[i]))
    if not bool(loaded.any()):
        raise LoadError("requantize_with_max_scale: no shard's weight scale was loaded")
    max_scale = slots[loaded].max()
    grid = max_scale.reshape(1, 1)
    starts = state.offsets
    parts = []
    for i, width in enumerate(state.widths):
        codes = state.codes[starts[i] : starts[i + 1]]
        if i in flagged:
            parts.append(torch.zeros_like(codes))
        elif width == 0 or bool(slots[i] == max_scale):
            parts.append(_positive_zeros(codes, spec.format))
        else:
            values = decode(codes, spec.format) * slots[i]
            parts.append(_positive_zeros(quantize(values, spec, grid).codes, spec.format))
    return replace(
        state,
        codes=torch.cat(parts, dim=0),
        weight_scale=max_scale.reshape(1),
        unloaded=tuple(sorted(set(state.unloaded) | set(flagged))),
    )


def _positive_zeros(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    """-0 codes (0x80 where it means -0) replaced by +0 (0x00); other codes unchanged."""
    if not get_format(fmt).has_negative_zero:
        return codes  # 0x80 is not a zero in this format (e4m3fnuz: NaN, never produced)
    return torch.where(codes == NEGATIVE_ZERO_CODE, 0, codes).to(torch.uint8)


def merge_input_scales(state: LoadState) -> LoadState:
    """One static activation scale for a fused layer: the max over its shards' scales.

    The activation is shared by every shard, so the kernel quantizes it once; the largest
    calibrated scale is the one that saturates nothing any shard's calibration saw.
    """
    if state.input_scale is None or state.input_scale.numel() == 1:
        return state if state.input_scale is None else _as_grid(state, state.input_scale)
    slots = state.input_scale.reshape(-1)
    loaded = loaded_slots(slots)
    if not bool(loaded.any()):
        raise LoadError("merge_input_scales: no shard's input scale was loaded")
    return _as_grid(state, slots[loaded].max())


def _as_grid(state: LoadState, scale: torch.Tensor) -> LoadState:
    return replace(state, input_scale=scale.reshape(1, 1).float())


# --------------------------------------------------------- kernel shapes and layout
def scales_to_tile_grid(state: LoadState) -> LoadState:
    """Reshape the weight scale to the tile grid the paths and kernels expect.

    Per-tensor: one scale (1, 1); per-channel: a (N, 1) column (checkpoints store (N,) or
    (N, 1)), which torch._scaled_mm's row-wise mode takes as (1, N) after the transpose;
    blocks: the [ceil(N/r), ceil(K/c)] grid. Anything else is a pipeline ordering error.
    """
    spec = state.scheme.weight
    expected = scale_grid(spec, tuple(state.codes.shape))
    scale = state.weight_scale
    if scale.numel() != math.prod(expected):
        raise LoadError(
            f"scales_to_tile_grid: weight scale has {scale.numel()} elements, but a "
            f"{spec.granularity} scale of a {tuple(state.codes.shape)} weight has grid "
            f"{expected}; a fused per-tensor layer needs requantize_with_max_scale first"
        )
    return replace(state, weight_scale=scale.reshape(expected).float())


def contiguous_kernel_layout(state: LoadState) -> LoadState:
    """Row-major contiguous [N, K] codes and contiguous scales.

    torch._scaled_mm wants B column-major: the native path passes ``codes.t()``, which is
    column-major only if the [N, K] codes are row-major contiguous. A sliced or transposed
    view would make the kernel reject B (or a copying path silently transpose it).
    """
    return replace(
        state,
        codes=state.codes.contiguous(),
        weight_scale=state.weight_scale.contiguous(),
        input_scale=None if state.input_scale is None else state.input_scale.contiguous(),
    )
