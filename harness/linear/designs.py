"""Input designs: linear cases built to show one bug class each, checked against the reference.

The golden cases (`harness.linear.cases`) are bf16-valued, short (K <= 256), with
power-of-two static scales and outputs well inside fp16's range, so several realistic
faults change nothing there. Each design here is one input built so that one of them
moves an output by far more than the derived bound (`docs/TEETH.md` gives the argument
per class). No golden is stored: the reference quantizer (held bit for bit to the goldens
by test_linear.py) quantizes the inputs, and the float64 product of the dequantized
operands is the reference, as in the float32-activation suite.

- ``bf16_binade``: float32 activations, every MX block's amax just beside where the scale
  rule changes its answer and onto it in bf16. Shows an MX scale taken from a bf16 copy
  of a float32 activation.
- ``static_ties``: a static scale s that is neither a power of two nor a bf16 value,
  elements with x / s exactly a tie and x * fl(1/s) across it, a per-tensor weight scale
  that is no power of two. Shows static quantization by a rounded reciprocal multiply,
  and scales applied in bf16.
- ``long_k``: K = 4160 (4224 for 128-blocks), every row's amax doubled into its last 64
  columns. Shows a reduction over a prefix of K.
- ``fp16_overflow``: outputs up to about 2^17 in fp16. Shows saturating (or not)
  fp16 outputs against the declared rule (`Numerics.overflow`).
- ``scale_grid_3x5``, ``scale_grid_2x3``: 128x128 weight-scale grids of 3x5 and 2x3
  blocks. Show a transposed weight-scale grid.
- ``odd_k_blocks``: M 5, N 80, K 640 = five 128-wide blocks (672 = 21 MX blocks where the
  scheme's K scale block is 32), no size a power of two. Shows K split or stepped in
  pieces that are not whole blocks: split-K pieces of cdiv(K, 2) or cdiv(K, 3) that
  overlap, read past K or take another block's scale.
- ``subnormal_codes``: one row per operand with qmax * s and every subnormal code times
  s, the other operand picking out those products alone. Shows subnormal codes flushed
  to zero, dynamic scales included.
- ``nvfp4_tiny_blocks``: NVFP4 operands whose blocks alternate (a checkerboard over rows
  and 16-wide blocks, `subnormal_block_scales`) between the tensor's magnitude and about
  2^-16 of it, so their E4M3 block scales take every subnormal code; x's tiny blocks face
  w's large ones in half the outputs, which are then made of tiny-block products alone.
  Shows E4M3 block scales flushed to zero or held at E4M3's smallest normal. bf16-valued.
- ``nvfp4_tiny_blocks_float32``: the same with float32-valued activations (bits below
  bf16 in every element). Shows, on top, an NVFP4 activation quantized from a bf16 copy.
- ``square``: N == K (17 x 384 x 384: M no power of two, a 3x3 grid of 128x128 blocks).
  Every other shape has N != K, so a fault that only shows where the two are equal (a
  weight layout guessed from its shape) needs one of its own; the others show the reverse.
- ``blocks_128x64``, ``blocks_64x128``: the block-FP8 recipe with non-square weight blocks
  (block_n != block_k) and activation groups of block_k (`blocks_variant`): the weight
  scales indexed by the other block size, or activation groups of a hard-wired 128, show
  only here. N and K hold several blocks of each size, N a partial one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from harness.core.formats import get_format, magnitudes
from harness.core.hard_inputs import (
    binade_crossing,
    calibration_amax,
    plant_reciprocal_ties,
    reciprocal_tie_scale,
    subnormal_block_scales,
    tail_amax,
)
from harness.core.inputs import bias_vector, plant_corners, scaled_normal
from harness.core.quantize import quantize_activation, quantize_linear, tile_amax, tile_shape
from harness.core.scales import compute_scale
from harness.core.schemes import QuantSpec, Scheme, get_scheme
from harness.linear.cases import (
    OUT_DTYPES,
    LoadedLinearCase,
    linear_inputs,
    normalize_output,
    shape_id,
)
from harness.paths import LinearProblem
from harness.paths.case import Case

Shape = tuple[int, int, int]
Inputs = dict[str, torch.Tensor]
LONG_TAIL = 64  # columns at the end of a long row that hold its amax
FP16_OVERFLOW_PEAK = 2.0**17  # the largest |output| within a factor sqrt(2): past 65504


@dataclass(frozen=True)
class Design:
    """One input design: which schemes, which shape, which outputs, and its builder."""

    name: str
    shows: str  # the bug class it is built for
    schemes: tuple[str, ...]
    shape: Callable[[Scheme], Shape]
    out_dtypes: tuple[str, ...]
    build: Callable[[str, Shape, str], Inputs]  # (scheme, shape, seed base) -> inputs
    bias: bool = True
    float32_activation: bool = False  # x holds bits below bf16 (engines fed bf16 skip it)
    # The scheme's recipe with other parameters (`blocks_variant`); None: as registered.
    variant: Callable[[Scheme], Scheme] | None = None


def _fixed(shape: Shape) -> Callable[[Scheme], Shape]:
    return lambda scheme: shape


def _long_k(scheme: Scheme) -> Shape:
    """K >= 4096 and no multiple of 256..1024: 4160 = 130 * 32, or 4224 = 33 * 128 where a
    scale tile is 128 wide (whole blocks, as 128x128 kernels need)."""
    widths = {s.block[1] for s in (scheme.weight, scheme.activation) if s is not None}
    return (4, 16, 4224 if 128 in widths else 4160)


ODD_K_BLOCKS = 5  # K in 128-wide blocks: no split of it into 2 or 3 is whole blocks


def _odd_k_blocks(scheme: Scheme) -> Shape:
    """M, N, K no powers of two; K an odd number of 128-wide blocks (640), plus one scale
    block where the scheme's K scale block is narrower (672 = 21 MX blocks: an odd count of
    those too). N = 80 leaves a partial 128-row weight-scale block."""
    widths = [s.block[1] for s in (scheme.weight, scheme.activation) if s is not None]
    narrow = min((w for w in widths if w is not None and w < 128), default=0)
    return (5, 80, ODD_K_BLOCKS * 128 + narrow)


def blocks_variant(block_n: int, block_k: int) -> Callable[[Scheme], Scheme]:
    """A block scheme's recipe with block_n x block_k weight blocks and 1 x block_k dynamic
    activation groups, under the same name: the block size is a parameter of a block-FP8
    checkpoint (``weight_block_size``), not another recipe, so every path that runs the
    scheme is asked to run these blocks too, and a kernel whose contract names other
    blocks declines (`OperandContract`). The activation group is block_k wide, as engines
    size it from the weight's block (vLLM and SGLang: ``block_size[1]``)."""

    def variant(scheme: Scheme) -> Scheme:
        act = scheme.activation
        if act is None or scheme.weight.block[0] in (None, 1) or act.block[0] != 1:
            raise ValueError(f"{scheme.name} has no weight blocks and activation groups")
        return replace(
            scheme,
            weight=replace(scheme.weight, block=(block_n, block_k)),
            activation=replace(act, block=(1, block_k)),
            description=f"{scheme.description}; here {block_n}x{block_k} weight blocks, "
            f"1x{block_k} activation groups",
        )

    return variant


# ------------------------------------------------------------------------- builders
def _bf16_binade(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """The golden-style inputs of this shape with every activation block's amax moved to
    where bf16 rounding changes its scale (`binade_crossing`); float32, not bf16."""
    scheme = get_scheme(scheme_name)
    inputs = linear_inputs(scheme_name, shape)
    assert scheme.activation is not None
    x = binade_crossing(inputs["x"], scheme.activation)
    return {**inputs, "x": x, "w": normalize_output(x, inputs["w"]), "calibration": x}


def _static_ties(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """Static scale S = s * 2^k (`reciprocal_tie_scale`: not a power of two, not a bf16
    value) calibrated on another batch; rows 0 and 1 hold x0 * 2^j with x / S a tie and
    x * fl(1/S) across it; the weight keeps its own (not power-of-two) per-tensor scale."""
    scheme = get_scheme(scheme_name)
    act = scheme.activation
    assert act is not None
    assert not act.dynamic
    m, n, k = shape
    x = scaled_normal(f"{base}/x", m, k, act)
    rt = reciprocal_tie_scale(act.format)
    exponent = int(torch.tensor(float(x.abs().max()) / (act.qmax * rt.scale)).log2().ceil())
    scale = rt.scale * 2.0**exponent
    if float(torch.tensor(scale).to(torch.bfloat16)) == scale:
        raise AssertionError(f"static_ties: the scale {scale} is a bf16 value")
    x, _ = plant_reciprocal_ties(x, act, scale)
    calibration = scaled_normal(f"{base}/calibration", m, k, act)
    calibration = calibration * (act.qmax * scale / 2 / float(calibration.abs().max()))
    calibration[-1, -1] = calibration_amax(scale, act)
    w = scaled_normal(f"{base}/w", n, k, scheme.weight)
    return {
        "x": x,
        "w": normalize_output(x, w),
        "bias": bias_vector(f"{base}/bias", n),
        "calibration": calibration,
    }


def _long_rows(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """Seeded inputs of a long K whose rows (both operands) peak in their last columns."""
    scheme = get_scheme(scheme_name)
    m, n, k = shape
    x = tail_amax(scaled_normal(f"{base}/x", m, k, scheme.activation), LONG_TAIL)
    w = tail_amax(scaled_normal(f"{base}/w", n, k, scheme.weight), LONG_TAIL)
    return {
        "x": x,
        "w": normalize_output(x, w),
        "bias": bias_vector(f"{base}/bias", n),
        "calibration": x,
    }


def _fp16_overflow(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """The golden-style inputs of this shape, W scaled (a power of two) so the largest
    outputs are about 2^17, beyond fp16's largest finite 65504."""
    inputs = linear_inputs(scheme_name, shape)
    w = normalize_output(inputs["x"], inputs["w"], FP16_OVERFLOW_PEAK)
    y = inputs["x"].double() @ w.double().t() + inputs["bias"].double()
    if not bool((y.abs() > 1.1 * torch.finfo(torch.float16).max).any()):
        raise AssertionError(f"fp16_overflow: no output of {scheme_name} beyond fp16's max")
    return {**inputs, "w": w}


def _seeded(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """The golden-style inputs (`linear_inputs`) of a shape no golden holds."""
    return linear_inputs(scheme_name, shape)


def _seeded_as(variant: Callable[[Scheme], Scheme]) -> Callable[[str, Shape, str], Inputs]:
    """Golden-style seeded inputs (dynamic activations, corners planted) spread by the
    variant's tiles, so each of its blocks and groups has its own order of magnitude and a
    scale read from the wrong one moves the outputs it touches."""

    def build(scheme_name: str, shape: Shape, base: str) -> Inputs:
        scheme = variant(get_scheme(scheme_name))
        act = scheme.activation
        assert act is not None
        assert act.dynamic
        m, n, k = shape
        x = plant_corners(scaled_normal(f"{base}/x", m, k, act), act, f"{base}/x")
        w = scaled_normal(f"{base}/w", n, k, scheme.weight)
        w = plant_corners(w, scheme.weight, f"{base}/w")
        return {
            "x": x,
            "w": normalize_output(x, w),
            "bias": bias_vector(f"{base}/bias", n),
            "calibration": x,
        }

    return build


def _blocks_design(blocks: tuple[int, int], shows: str, shape: Shape) -> Design:
    """A block-FP8 design under `blocks_variant`: its inputs are seeded by the same variant
    its scheme runs under, so the two cannot name different blocks."""
    variant = blocks_variant(*blocks)
    return Design(
        f"blocks_{blocks[0]}x{blocks[1]}",
        shows,
        BLOCK_FP8,
        _fixed(shape),
        ("bf16",),
        _seeded_as(variant),
        variant=variant,
    )


def _small_base(
    name: str, rows: int, cols: int, spec: QuantSpec | None, peak: float
) -> torch.Tensor:
    """Seeded inputs scaled so their largest magnitude is ``peak``."""
    x = scaled_normal(name, rows, cols, spec)
    return x * (peak / float(x.abs().max()))


def _unit_scale(spec: QuantSpec | None) -> float:
    """A power of two s with qmax * s >= 4: ones are then normal codes of the tile."""
    return 1.0 if spec is None else float(2.0 ** torch.tensor(4 / spec.qmax).log2().ceil())


def _plant_subnormals(op: torch.Tensor, spec: QuantSpec, row: int) -> list[int]:
    """Row ``row`` of ``op``: element 0 becomes qmax * s (its tile's peak; s as
    `_unit_scale`), elements 1..p every subnormal code of the format times the tile's scale,
    signs alternating. Returns the planted columns."""
    op[row, 0] = spec.qmax * _unit_scale(spec)
    br, bc = tile_shape(spec, op.shape)
    scale = float(compute_scale(tile_amax(op, spec), spec)[row // br, 0])
    fmt = get_format(spec.format)
    subs = [v for v in magnitudes(spec.format).tolist() if 0 < v < fmt.min_normal]
    cols = list(range(1, min(len(subs), bc - 1) + 1))
    for c, v in zip(cols, subs, strict=False):
        op[row, c] = v * scale * (1 if c % 2 else -1)
    return cols


def _pick_out(partner: torch.Tensor, row: int, cols: list[int]) -> None:
    """Row ``row`` of the other operand: ones at ``cols``, 2^-40 elsewhere, so the output
    (row, row) is the planted subnormal products alone (the peak's product is ~2^-31 of it)."""
    partner[row] = 2.0**-40
    partner[row, cols] = 1.0


def _subnormal_codes(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """Output (0, 0) is decided by the activation's subnormal codes, output (1, 1) by the
    weight's, whatever the scales (dynamic ones included): each operand's row holds its
    tile's peak and every subnormal code, the other operand's row picks out the subnormal
    products. Everything else is seeded and at most a quarter of the planted peaks."""
    scheme = get_scheme(scheme_name)
    act, wspec = scheme.activation, scheme.weight
    m, n, k = shape
    x = _small_base(f"{base}/x", m, k, act, act.qmax * _unit_scale(act) / 4 if act else 1.0)
    w = _small_base(f"{base}/w", n, k, wspec, wspec.qmax * _unit_scale(wspec) / 4)
    if act is not None:
        _pick_out(w, 0, _plant_subnormals(x, act, 0))
    _pick_out(x, 1, _plant_subnormals(w, wspec, 1))
    x, w = x.to(torch.bfloat16).float(), w.to(torch.bfloat16).float()
    return {"x": x, "w": w, "bias": bias_vector(f"{base}/bias", n), "calibration": x}


def _tiny_blocks(scheme_name: str, shape: Shape, base: str, float32_x: bool) -> Inputs:
    """Both operands with every other block (a checkerboard over rows and K blocks) shrunk
    so its E4M3 block scale is subnormal (`subnormal_block_scales`, under the weight's grid
    for an unquantized activation). Rows of opposite parity face each other's tiny blocks
    with their large ones, so half the outputs are sums of tiny-block products alone: a
    flushed or clamped block scale moves them by a whole term, not by 2^-16 of one. x is
    rounded to bf16 unless ``float32_x``; w is quantized offline, so stays float32."""
    scheme = get_scheme(scheme_name)
    m, n, k = shape
    act = scheme.activation or scheme.weight
    x = subnormal_block_scales(scaled_normal(f"{base}/x", m, k, act), act)
    if not float32_x:
        x = x.to(torch.bfloat16).float()
    elif bool((x.to(torch.bfloat16).float() == x).all()):
        raise AssertionError(f"nvfp4_tiny_blocks_float32: {scheme_name}'s x is bf16-valued")
    w = subnormal_block_scales(scaled_normal(f"{base}/w", n, k, scheme.weight), scheme.weight)
    return {
        "x": x,
        "w": normalize_output(x, w),
        "bias": bias_vector(f"{base}/bias", n),
        "calibration": x,
    }


def _tiny_blocks_bf16(scheme_name: str, shape: Shape, base: str) -> Inputs:
    return _tiny_blocks(scheme_name, shape, base, float32_x=False)


def _tiny_blocks_float32(scheme_name: str, shape: Shape, base: str) -> Inputs:
    return _tiny_blocks(scheme_name, shape, base, float32_x=True)


# Weight scale exponents, one per scale tile in turn: both signs, the ends a decoder's
# special cases sit near (2^7 is E8M0 byte 134, the decoded 128.0 a float-valued sentinel
# test mistakes for the NaN byte 0xFF), and zero.
SCALE_SPAN_EXPONENTS = (7, -7, 0, 12, -12, 3, -3, 8, -8, 1, -1, 5)


def _scale_span_shape(scheme: Scheme) -> Shape:
    """Enough scale tiles for every exponent of `SCALE_SPAN_EXPONENTS` at least once."""
    return (4, 256, 1536) if scheme.weight.block[0] == 128 else (4, 32, 256)


def _e8m0_scale_span(scheme_name: str, shape: Shape, base: str) -> Inputs:
    """Seeded inputs whose weight scale tiles have amax exactly qmax * 2^e, e cycling
    through `SCALE_SPAN_EXPONENTS`, so every E8M0 rule gives each tile the scale 2^e: a
    decoder of stored E8M0 bytes meets each of those codes (2^7 among them)."""
    scheme = get_scheme(scheme_name)
    spec = scheme.weight
    m, n, k = shape
    x = scaled_normal(f"{base}/x", m, k, scheme.activation)
    w = scaled_normal(f"{base}/w", n, k, spec)
    rows, cols = tile_shape(spec, w.shape)
    tile = 0
    for r0 in range(0, n, rows):
        for c0 in range(0, k, cols):
            block = w[r0 : r0 + rows, c0 : c0 + cols]
            peak = spec.qmax * 2.0 ** SCALE_SPAN_EXPONENTS[tile % len(SCALE_SPAN_EXPONENTS)]
            block.mul_(peak / float(block.abs().max()))
            r, c = divmod(int(block.abs().argmax()), block.shape[1])
            block[r, c] = peak if float(block[r, c]) > 0 else -peak  # exactly qmax * 2^e
            tile += 1
    if tile < len(SCALE_SPAN_EXPONENTS):
        raise AssertionError(f"e8m0_scale_span: {tile} scale tiles for {scheme_name}")
    return {"x": x, "w": w, "bias": bias_vector(f"{base}/bias", n), "calibration": x}


MX_ACTIVATIONS = (
    "w_mxfp4_a_mxfp4",
    "w_mxfp4_a_mxfp4@rceil",
    "w_mxfp4_a_fp8",
    "w_mxfp6_e3m2_a_mxfp6_e3m2",
    "w_mxfp8_a_mxfp8",
    "w_mxfp8_a_mxfp8@rceil",
)
BLOCK_FP8 = ("fp8_per_block", "fp8_per_block_fnuz", "fp8_per_block_ue8m0")
STATIC = (
    "fp8_per_tensor",
    "fp8_per_tensor_fnuz",
    "fp8_per_tensor_fnuz_clamp224",
    "fp8_w_per_channel_a_static",
    "fp8_w_per_channel_a_static_fnuz",
)
NVFP4 = ("w_nvfp4", "w_nvfp4_a_nvfp4")
DESIGNS: tuple[Design, ...] = (
    Design(
        "bf16_binade",
        "MX scale from a bf16 copy of a float32 activation",
        MX_ACTIVATIONS,
        _fixed((8, 64, 256)),
        ("bf16", "fp32"),
        _bf16_binade,
        float32_activation=True,
    ),
    Design(
        "static_ties",
        "static quantization by a rounded reciprocal; scales applied in bf16",
        STATIC,
        _fixed((4, 32, 256)),
        ("bf16", "fp32"),
        _static_ties,
    ),
    Design(
        "long_k",
        "a reduction over a prefix of K",
        (
            "fp8_per_tensor",
            "fp8_per_channel",
            "fp8_per_block",
            "w_mxfp4",
            "w_mxfp4_a_mxfp4",
            "w_mxfp8_a_mxfp8",
            "w_nvfp4_a_nvfp4",
        ),
        _long_k,
        ("bf16",),
        _long_rows,
    ),
    Design(
        "fp16_overflow",
        "fp16 outputs beyond 65504 (saturated or not, against the declared rule)",
        ("fp8_per_tensor", "fp8_per_channel", "fp8_per_block", "w_mxfp4", "w_mxfp8_a_mxfp8"),
        _fixed((8, 32, 256)),
        ("fp16",),
        _fp16_overflow,
    ),
    Design(
        "scale_grid_3x5",
        "a transposed weight-scale grid",
        ("fp8_per_block", "fp8_per_block_fnuz"),
        _fixed((2, 384, 640)),
        ("bf16",),
        _seeded,
    ),
    Design(
        "scale_grid_2x3",
        "a transposed weight-scale grid",
        ("fp8_per_block", "fp8_per_block_fnuz"),
        _fixed((2, 256, 384)),
        ("bf16",),
        _seeded,
    ),
    Design(
        "e8m0_scale_span",
        "a decoder of stored E8M0 scales wrong at some codes (a NaN test on the decoded value)",
        (
            "fp8_per_block_ue8m0",
            "w_mxfp4",
            "w_mxfp4_a_mxfp4",
            "w_mxfp4_a_fp8_per_token",
            "w_mxfp6_e3m2",
            "w_mxfp8_a_mxfp8",
        ),
        _scale_span_shape,
        ("bf16", "fp32"),
        _e8m0_scale_span,
    ),
    Design(
        "odd_k_blocks",
        "K split or stepped in pieces that are not whole blocks (split-K pieces overlapping)",
        (
            "fp8_per_tensor",
            "fp8_per_channel",
            "fp8_per_channel_fnuz",
            "fp8_per_block",
            "fp8_per_block_fnuz",
            "w_mxfp4_a_mxfp4",
            "w_mxfp4_a_fp8_per_token",
        ),
        _odd_k_blocks,
        ("bf16",),
        _seeded,
    ),
    Design(
        "square",
        "a fault only where N == K (a weight layout guessed from its shape)",
        (
            "fp8_per_tensor",
            "fp8_per_channel",
            "fp8_per_block",
            "fp8_per_block_fnuz",
            "fp8_per_block_ue8m0",
            "w_mxfp4_a_mxfp4",
            "w_mxfp4_a_fp8_per_token",
            "w_mxfp8_a_mxfp8",
        ),
        _fixed((17, 384, 384)),
        ("bf16",),
        _seeded,
    ),
    _blocks_design(
        (128, 64),
        "weight scales indexed by block_k where block_n belongs; 128-wide activation groups",
        (3, 352, 384),  # 2.75 x 6 blocks of 128x64
    ),
    _blocks_design(
        (64, 128),
        "weight scales indexed by block_k where block_n belongs",
        (3, 304, 384),  # 4.75 x 3 blocks of 64x128
    ),
    Design(
        "subnormal_codes",
        "subnormal codes flushed to zero, dynamic scales included",
        (
            "fp8_per_tensor",
            "fp8_per_channel",
            "fp8_per_block",
            "w_mxfp4",
            "w_mxfp4_a_mxfp4",
            "w_mxfp6_e3m2_a_mxfp6_e3m2",
            "w_mxfp8_a_mxfp8",
        ),
        _fixed((8, 16, 256)),
        ("bf16", "fp32"),
        _subnormal_codes,
        bias=False,
    ),
    Design(
        "nvfp4_tiny_blocks",
        "E4M3 block scales flushed to zero or held at E4M3's smallest normal",
        NVFP4,
        _fixed((8, 32, 256)),
        ("bf16", "fp32"),
        _tiny_blocks_bf16,
    ),
    Design(
        "nvfp4_tiny_blocks_float32",
        "subnormal E4M3 block scales under float32 activations (an NVFP4 scale from bf16)",
        NVFP4,
        _fixed((8, 32, 256)),
        ("bf16", "fp32"),
        _tiny_blocks_float32,
        float32_activation=True,
    ),
)
DESIGNS_BY_NAME = {d.name: d for d in DESIGNS}


def design_scheme(design: str, scheme_name: str) -> Scheme:
    """The scheme a design runs: the registered one, or its `Design.variant`."""
    scheme = get_scheme(scheme_name)
    variant = DESIGNS_BY_NAME[design].variant
    return scheme if variant is None else variant(scheme)


def design_inputs(design: str, scheme_name: str) -> Inputs:
    """The inputs of one design for one scheme (x, w, bias, calibration; float32)."""
    d = DESIGNS_BY_NAME[design]
    shape = d.shape(get_scheme(scheme_name))
    seed = get_scheme(scheme_name).input_seed_name
    return d.build(scheme_name, shape, f"design/{design}/{seed}/{shape_id(shape)}")


@lru_cache(maxsize=32)
def design_case(design: str, scheme_name: str) -> LoadedLinearCase:
    """The case as a golden would hold it, computed here (as the float32-activation suite
    does): the layer, the input and the float64 product of the dequantized operands."""
    scheme = design_scheme(design, scheme_name)
    inputs = design_inputs(design, scheme_name)
    layer = quantize_linear(inputs["w"], inputs["bias"], scheme, calibration=inputs["calibration"])
    xq = quantize_activation(inputs["x"], scheme, layer.input_scale)
    a = inputs["x"].double() if xq is None else xq.dequantize(torch.float64)
    y_ref = (a @ layer.weight.dequantize(torch.float64).t()).float()
    return LoadedLinearCase(layer, inputs["x"], y_ref, inputs)


@dataclass(frozen=True)
class DesignCase(Case):
    """One design on one scheme, path and output dtype."""

    SUITE = "linear"
    ID = ("scheme", "path", "design", "out_dtype")
    RECORD = ("scheme", "path", "shape", "bias", "out_dtype", "design")
    FINDING_SUITE = "linear"

    design: str
    scheme: str
    path: str
    out_dtype: str

    @property
    def bias(self) -> bool:
        return DESIGNS_BY_NAME[self.design].bias

    @property
    def shape(self) -> Shape:
        return DESIGNS_BY_NAME[self.design].shape(get_scheme(self.scheme))

    @property
    def scheme_spec(self) -> Scheme:
        """The scheme this case runs (a design may vary its blocks: `design_scheme`)."""
        return design_scheme(self.design, self.scheme)

    @property
    def problem(self) -> LinearProblem:
        m, n, k = self.shape
        return LinearProblem(m, n, k, self.bias, OUT_DTYPES[self.out_dtype])

    @property
    def finding_case_name(self) -> str:
        return self.design


def design_cases(paths: list[str]) -> Iterator[DesignCase]:
    for d in DESIGNS:
        for scheme in d.schemes:
            for path in paths:
                for out in d.out_dtypes:
                    yield DesignCase(d.name, scheme, path, out)
