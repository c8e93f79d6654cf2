"""Reference quantizers: tensors -> codes + scales, per scheme, and back.

Every granularity is a tile of ``block = (rows, cols)`` elements of a 2-D tensor
``[rows, K]`` (K is the reduction dimension) sharing one scale: per-tensor is one tile,
per-channel/per-token is ``(1, K)``, FP8 block scaling is ``(128, 128)`` or ``(1, 128)``,
MX is ``(1, 32)``. Scales are kept as float32 values on a tile grid ``[ceil(R/r), ceil(K/c)]``;
E8M0 (MX) scales are float32 powers of two (NaN for the 0xFF code), exactly representable,
and are stored in their own format (uint8 E8M0 codes) by `stored_scale`.

`quantize` and `QuantizedTensor.dequantize` run the fast codecs of `harness.core.fastcodec`
and divide or multiply by the scale grid through broadcasting; ``reference=True`` runs the
readable reference codecs (`harness.core.formats`, `harness.core.scales`) on fully expanded
scales instead. Both give the same bits (tests/core/test_fastcodec.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.conventions import (
    drop_negative_zero_codes,
    element_ties,
    scale_elements,
    source_values,
    two_level_multiplier,
    unsigned_zero_codes,
)
from harness.core.fastcodec import (
    E8M0Rule,
    decode_scaled,
    divide_and_encode,
    e8m0_block_encode,
    e8m0_codes_of,
    e8m0_rule,
    encode_fast,
    encoder,
)
from harness.core.formats import decode, e8m0_decode, encode
from harness.core.fused import large_cpu_compiled
from harness.core.scale_formats import E8M0
from harness.core.scales import E8M0_MODES, compute_global_scale, compute_scale
from harness.core.schemes import QuantSpec, Scheme


@dataclass
class QuantizedTensor:
    """Codes (uint8, one per element, shape [R, K]) and tile scales (float32).

    A two-level scale format (`ScaleFormat.per_tensor_level`, NVFP4) also has
    ``global_scale``, a float32 [1, 1] per-tensor scale; ``scale`` then holds the block
    scales (values of the block format, E4M3) and an element stands for
    code * (scale * global_scale). One-level formats leave it None.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    spec: QuantSpec
    global_scale: torch.Tensor | None = None

    def effective_scale(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The tile grid each code is multiplied by: ``scale``, times ``global_scale`` for a
        two-level format (one float32 rounding; in float64 the product is exact)."""
        if self.global_scale is None:
            return self.scale.to(dtype)
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        return (self.scale.to(wide) * self.global_scale.to(wide)).to(dtype)

    def dequantize(
        self, dtype: torch.dtype = torch.float32, *, reference: bool = False
    ) -> torch.Tensor:
        """The values the codes and scales stand for, as code * scale in ``dtype``.

        float64 is exact (at most 4 + 24 significant bits; two-level: 2 + 4 + 24 bits);
        float32 rounds once where a float32 scale times a code needs more than 24 bits
        (power-of-two scales are exact). References and error bounds use float64; the
        emulated path uses float32, as kernels do.
        """
        scale = self.effective_scale(dtype)
        if reference:
            codes = decode(self.codes, self.spec.format).to(dtype)
            return codes * expand_scale(scale, self.spec, self.codes.shape)
        fmt = self.spec.format
        return _apply_to_tiles(
            self.codes,
            scale,
            self.spec,
            lambda codes, scale: decode_scaled(codes, fmt, scale, dtype),
        )

    def to(self, device: torch.device | str) -> QuantizedTensor:
        g = None if self.global_scale is None else self.global_scale.to(device)
        return QuantizedTensor(self.codes.to(device), self.scale.to(device), self.spec, g)


def stored_scale(scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Scales as a checkpoint stores them, in the spec's scale format (float32; uint8 E8M0
    codes for MX; uint8 E4M3 codes for NVFP4's block level): lossless, or it raises."""
    return spec.scale_fmt.store(scale.float())


def scale_from_stored(stored: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Inverse of `stored_scale`: float32 scales, bit for bit."""
    return spec.scale_fmt.load(stored)


def stored_static_scale(scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """A calibrated (static) activation scale as stored: `stored_scale`, except that for a
    two-level format the static part is the float32 per-tensor level, stored as it is."""
    return scale.float() if spec.scale_fmt.per_tensor_level else stored_scale(scale, spec)


def static_scale_from_stored(stored: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Inverse of `stored_static_scale`, bit for bit."""
    return stored.float() if spec.scale_fmt.per_tensor_level else scale_from_stored(stored, spec)


def tile_shape(spec: QuantSpec, shape: torch.Size | tuple[int, ...]) -> tuple[int, int]:
    rows, cols = shape
    br = spec.block[0] or rows
    bc = spec.block[1] or cols
    return br, bc


def scale_grid(spec: QuantSpec, shape: torch.Size | tuple[int, ...]) -> tuple[int, int]:
    br, bc = tile_shape(spec, shape)
    return math.ceil(shape[0] / br), math.ceil(shape[1] / bc)


def tile_amax(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Absolute maximum of each tile (NaN propagates); partial edge tiles are zero-padded."""
    if x.dim() != 2:
        raise ValueError(f"quantize expects a 2-D [rows, K] tensor, got shape {tuple(x.shape)}")
    br, bc = tile_shape(spec, x.shape)
    gr, gc = scale_grid(spec, x.shape)
    padded = torch.nn.functional.pad(
        x.float().abs(), (0, gc * bc - x.shape[1], 0, gr * br - x.shape[0])
    )
    tiles = padded.reshape(gr, br, gc, bc)
    return tiles.amax(dim=(1, 3))


def expand_scale(
    scale: torch.Tensor, spec: QuantSpec, shape: torch.Size | tuple[int, ...]
) -> torch.Tensor:
    """Broadcast a tile-grid scale to the full [R, K] tensor."""
    br, bc = tile_shape(spec, shape)
    expected = scale_grid(spec, shape)
    if tuple(scale.shape) != expected:
        raise ValueError(
            f"scale shape {tuple(scale.shape)} does not match the tile grid {expected} "
            f"of a {tuple(shape)} tensor with {spec.granularity} scales"
        )
    full = scale.repeat_interleave(br, dim=0).repeat_interleave(bc, dim=1)
    return full[: shape[0], : shape[1]]


def _apply_to_tiles(
    x: torch.Tensor,
    scale: torch.Tensor,
    spec: QuantSpec,
    op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """``op(x, expand_scale(scale))`` element by element, broadcasting when tiles fit exactly."""
    br, bc = tile_shape(spec, x.shape)
    gr, gc = scale_grid(spec, x.shape)
    if tuple(scale.shape) != (gr, gc) or gr * br != x.shape[0] or gc * bc != x.shape[1]:
        return op(x, expand_scale(scale, spec, x.shape))  # partial edge tiles (or a bad grid)
    tiles = x.reshape(gr, br, gc, bc)
    return op(tiles, scale.reshape(gr, 1, gc, 1)).reshape(x.shape)


def _exact_tiles(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor | None:
    """The [gr, br, gc, bc] view of a 2-D tensor its tiles cover exactly, else None."""
    if x.dim() != 2 or not x.numel():
        return None
    br, bc = tile_shape(spec, x.shape)
    gr, gc = scale_grid(spec, x.shape)
    if gr * br != x.shape[0] or gc * bc != x.shape[1]:
        return None
    return x.reshape(gr, br, gc, bc)


def _scale_fast(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """`compute_scale(tile_amax(x))`, fused for large CPU tensors where the tiles fit."""
    tiles = _exact_tiles(x, spec)
    # the fused E8M0 rules know the format's own bound only; a clamped spec takes the reference
    e8m0 = spec.scale_fmt is E8M0 and spec.scale_rounding in E8M0_MODES and spec.clamp_max is None
    if tiles is None:
        amax = tile_amax(x, spec)
    elif e8m0:
        # A NaN amax becomes the 0xFF code whatever its bits, so amax and scale fuse.
        return _e8m0_scale_of_tiles(tiles, e8m0_rule(spec.scale_rounding, spec.format))
    else:
        amax = _abs_amax_of_tiles(tiles)
        if bool(amax.isnan().any()):
            # A compiled max makes its own NaN (0xFFFFFFFF, sign set); the eager one
            # passes on the input's. The NaN's sign reaches the codes through an fp32
            # scale, so tiles with a NaN take the eager reduction (rare, and small grids).
            amax = tiles.abs().amax(dim=(1, 3))
    if e8m0:
        rule = e8m0_rule(spec.scale_rounding, spec.format)
        return e8m0_decode(e8m0_codes_of(amax.float().contiguous(), rule))
    return compute_scale(amax, spec)


@large_cpu_compiled
def _abs_amax_of_tiles(tiles: torch.Tensor) -> torch.Tensor:
    return tiles.abs().amax(dim=(1, 3))  # NaN propagates


@large_cpu_compiled
def _e8m0_scale_of_tiles(tiles: torch.Tensor, rule: E8M0Rule) -> torch.Tensor:
    return e8m0_decode(e8m0_codes_of(tiles.abs().amax(dim=(1, 3)), rule))


def _quantize_mx_one_pass(x: torch.Tensor, spec: QuantSpec) -> QuantizedTensor | None:
    """`quantize` for E8M0 scales by a rule on one-row blocks that cover ``x`` exactly (every
    MX scheme on whole blocks), reading ``x`` once (`e8m0_block_encode`) instead of once for
    the scales and once for the codes. Rows with a NaN or Inf block take the two-pass path,
    whose codes there are the reference's. None where it does not apply."""
    tiles = _exact_tiles(x, spec)
    if tiles is None or tiles.shape[1] != 1 or spec.clamp_max is not None:
        return None  # the fused rules know the format's own bound only
    if spec.scale_fmt is not E8M0 or spec.scale_rounding not in E8M0_MODES:
        return None
    rule = e8m0_rule(spec.scale_rounding, spec.format)
    enc = encoder(spec.format, spec.clamp_max)
    rows, _, blocks, size = tiles.shape
    codes, scale, nonfinite = e8m0_block_encode(tiles.reshape(rows, blocks, size), rule, enc)
    scale = scale.reshape(rows, blocks)
    codes = codes.view(torch.uint8).reshape(x.shape)
    if bool(nonfinite):
        redo = scale.isnan().any(dim=1)  # the NaN scale is the 0xFF code's
        codes[redo] = _apply_to_tiles(
            x[redo], scale[redo], spec, lambda t, s: divide_and_encode(t, s, enc)
        )
    return QuantizedTensor(codes, scale, spec)


def quantize(
    x: torch.Tensor,
    spec: QuantSpec,
    scale: torch.Tensor | None = None,
    *,
    reference: bool = False,
) -> QuantizedTensor:
    """Quantize a 2-D tensor; ``scale`` (tile grid) is given for static scales, else computed.

    For a two-level scale format the static part is the per-tensor level: ``scale`` is
    then the [1, 1] global scale (a calibrated activation's), and the block scales are
    always computed from the blocks under it (`_quantize_two_level`).

    The division ``x / scale`` is done in float32 (IEEE, correctly rounded, so it is the same
    on every platform), then the element codec rounds to nearest-even and saturates. A spec
    with engine conventions (harness.core.conventions) scales the elements their way; such
    specs (engine variants, never the defaults) take the reference scale computation.
    ``reference=True`` uses the reference codecs; the default fast ones give the same bits.
    """
    x32 = source_values(x.float(), spec) if spec.conventions else x.float()
    if spec.scale_fmt.per_tensor_level:
        return _quantize_two_level(x32, spec, scale, reference)
    if reference or spec.conventions:
        if scale is None:
            scale = compute_scale(tile_amax(x32, spec), spec)
        scale = scale.float().to(x.device)
        scaled = scale_elements(x32, expand_scale(_divisor(scale, spec), spec, x.shape), spec)
        ties = element_ties(spec)
        if ties != "even":  # only the reference codec breaks ties otherwise
            codes = encode(scaled, spec.format, spec.clamp_max, ties=ties)
        elif reference:
            codes = encode(scaled, spec.format, spec.clamp_max)
        else:
            codes = encode_fast(scaled, spec.format, spec.clamp_max)
        return QuantizedTensor(drop_negative_zero_codes(codes, spec), scale, spec)
    if scale is None:
        one_pass = _quantize_mx_one_pass(x32, spec)
        if one_pass is not None:
            return one_pass
        scale = _scale_fast(x32, spec)
    scale = scale.float().to(x.device)
    enc = encoder(spec.format, spec.clamp_max)
    divisor = _divisor(scale, spec)
    codes = _apply_to_tiles(x32, divisor, spec, lambda t, s: divide_and_encode(t, s, enc))
    return QuantizedTensor(codes, scale, spec)


def _divisor(scale: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """What elements are divided by: the scale, except that a minifloat block scale which
    rounded to zero (E4M3 can; fp32 and E8M0 scales never do) divides as Inf, so the
    block's elements encode to +-0 by their signs instead of saturating."""
    if spec.scale_fmt.element is None:
        return scale
    return torch.where(scale == 0, torch.full_like(scale, torch.inf), scale)


def _quantize_two_level(
    x32: torch.Tensor, spec: QuantSpec, global_scale: torch.Tensor | None, reference: bool
) -> QuantizedTensor:
    """NVFP4's quantize (docs/SCHEMES.md#nvfp4): the global scale from the tensor's amax
    unless given, E4M3 block scales of (block amax / qmax) / global, then the elements
    x / (block scale * global) rounded to nearest even. A block whose scale is zero (its
    amax underflows E4M3) has only +-0 codes: dividing by Inf gives them, keeping signs.
    Engine conventions (harness.core.conventions) adjust the block scales or multiply the
    elements by their own factor instead of dividing."""
    tiles = None if reference else _exact_tiles(x32, spec)
    amax = tile_amax(x32, spec) if tiles is None else _abs_amax_of_tiles(tiles)
    if tiles is not None and bool(amax.isnan().any()):
        amax = tiles.abs().amax(dim=(1, 3))  # the eager NaN, as `_scale_fast` keeps it
    if global_scale is None:
        global_scale = compute_global_scale(amax.max(), spec)  # NaN propagates
    g = global_scale.float().reshape(1, 1).to(x32.device)
    block = compute_scale(amax, spec, g)  # applies the spec's scale conventions
    multiplier = two_level_multiplier(spec)
    if multiplier is not None:  # an engine convention: x * m instead of x / (block * g)
        scaled = x32 * expand_scale(multiplier(block, g), spec, x32.shape)
        if unsigned_zero_codes(spec):
            scaled = torch.where(scaled == 0, torch.zeros_like(scaled), scaled)
        codec = encode if reference else encode_fast
        return QuantizedTensor(codec(scaled, spec.format, spec.clamp_max), block, spec, g)
    divisor = _divisor(block * g, spec)
    if reference:
        codes = encode(x32 / expand_scale(divisor, spec, x32.shape), spec.format, spec.clamp_max)
    else:
        enc = encoder(spec.format, spec.clamp_max)
        codes = _apply_to_tiles(x32, divisor, spec, lambda t, s: divide_and_encode(t, s, enc))
    return QuantizedTensor(codes, block, spec, g)


@dataclass
class QuantizedLinear:
    """A linear layer as an engine holds it after loading: y = x @ W^T + bias."""

    scheme: Scheme
    weight: QuantizedTensor  # [N, K]
    input_scale: torch.Tensor | None  # static activation scale (tile grid), if the scheme has one
    bias: torch.Tensor | None  # [N]

    def weight_block_size(self) -> list[int]:
        """``weight_block_size`` [block_n, block_k] of a block-FP8 layer, as engines' FP8
        configs hold it and hand their block kernels; its activation groups must be
        1 x block_k (ValueError for any other layer)."""
        block_n, block_k = self.weight.spec.block
        act = self.scheme.activation
        if block_n is None or block_k is None or act is None or act.block != (1, block_k):
            raise ValueError(f"not a block-FP8 layer: weight {self.weight.spec.granularity}")
        return [block_n, block_k]

    def to(self, device: torch.device | str) -> QuantizedLinear:
        return QuantizedLinear(
            self.scheme,
            self.weight.to(device),
            None if self.input_scale is None else self.input_scale.to(device),
            None if self.bias is None else self.bias.to(device),
        )


def calibrate_input_scale(x: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Static activation scale from calibration data: one scale for the whole batch (for a
    two-level scale format, its per-tensor level; the block scales stay per call)."""
    if spec.scale_fmt.per_tensor_level:
        return compute_global_scale(tile_amax(x.float(), spec).max(), spec)
    if spec.granularity != "per_tensor":
        raise ValueError(f"static activation scales must be per-tensor, not {spec.granularity}")
    return compute_scale(tile_amax(x.float(), spec), spec)


def quantize_input(
    x: torch.Tensor,
    spec: QuantSpec | None,
    static_scale: torch.Tensor | None,
    owner: str = "the layer",
) -> QuantizedTensor | None:
    """The one activation quantizer (linear inputs, MoE inputs and intermediates).

    ``spec`` None: activations stay unquantized (None is returned). Dynamic specs compute
    their scales per call; static ones use ``static_scale``, which calibration provided.
    """
    if spec is None:
        return None
    if not spec.dynamic and static_scale is None:
        raise ValueError(f"{owner} has static activation scales but none was given")
    return quantize(x, spec, None if spec.dynamic else static_scale)


def quantize_activation(
    x: torch.Tensor, scheme: Scheme, input_scale: torch.Tensor | None
) -> QuantizedTensor | None:
    """Quantize activations as the scheme says; None when activations stay unquantized."""
    return quantize_input(x, scheme.activation, input_scale, f"scheme {scheme.name}")


def quantize_linear(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    scheme: Scheme,
    calibration: torch.Tensor | None = None,
) -> QuantizedLinear:
    """Quantize a float linear layer; static input scales come from ``calibration``."""
    input_scale = None
    if scheme.activation is not None and not scheme.activation.dynamic:
        if calibration is None:
            raise ValueError(f"scheme {scheme.name} needs calibration data for its input scale")
        input_scale = calibrate_input_scale(calibration, scheme.activation)
    return QuantizedLinear(scheme, quantize(weight, scheme.weight), input_scale, bias)
