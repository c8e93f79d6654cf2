"""Linear-path canaries (``qharness.paths``): each differs from its control in one respect.

Controls: `ControlKernelPath` (the float32 kernel model, `common.KernelModelPath`) and
`ControlNativePath` (the built-in native path under another name). Every canary subclasses
one of them and overrides one hook; its docstring names the bug class and the one change.
"""

from __future__ import annotations

import dataclasses

import torch

from harness.core.formats import decode, encode, get_format, pack_fp4, unpack_fp4
from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    expand_scale,
    quantize,
    quantize_activation,
    tile_amax,
    tile_shape,
)
from harness.core.scales import compute_scale
from harness.core.schemes import Scheme, mx_spec
from harness.linear.paths.native import NativeScaledMMPath
from harness.ops.matmul import full_fp32_matmul
from harness.paths.base import LinearProblem, Support
from harness.paths.operands import QuantizedOperands
from harness.platform.info import PlatformInfo
from tests.canaries.common import (
    KernelModelPath,
    dequantize_with,
    encode_ties_away,
    quantize_with,
)


# ------------------------------------------------------------------------- controls
class ControlKernelPath(KernelModelPath):
    """Correct: the float32 kernel model. Must pass every test its canaries are run on."""

    name = "control_kernel"


class ControlNativePath(NativeScaledMMPath):
    """Correct: the built-in native path under another name."""

    name = "control_native"


class ControlOperandsPath(KernelModelPath):
    """Correct: a kernel model that shows its operands (`harness.paths.operands`) and
    multiplies exactly what it shows (dequantized in float32, one rounding)."""

    name = "control_operands"

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        return QuantizedOperands(xq, layer.weight)

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        operands = self.quantized_operands(layer, x, out_dtype)
        xq = operands.activation
        a = x.float() if xq is None else xq.dequantize()
        with full_fp32_matmul():
            y = a @ operands.weight.dequantize().t()
        return self.epilogue(y, layer.bias, out_dtype)


def _activation_with(x: torch.Tensor, layer: QuantizedLinear, **parts: object) -> torch.Tensor:
    """The scheme's activation quantization through `quantize_with` with ``parts`` swapped."""
    spec = layer.scheme.activation
    if spec is None:
        return x.float()
    static = None if spec.dynamic else layer.input_scale
    return quantize_with(x, spec, static, **parts).dequantize()  # type: ignore[arg-type]


# --------------------------------------------------------------- seed bugs (native)
class NativeDropsBias(ControlNativePath):
    """Seed bug, dropped bias on the native path: the kernel is called without the bias."""

    name = "canary_native_nobias"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        return super().forward(dataclasses.replace(layer, bias=None), x, out_dtype)


class NativeOneDimScales(ControlNativePath):
    """Seed bug, 1-D scales to a row-wise kernel: scales are passed as they are stored, and
    the kernel reads a 1-D scale as a tensor-wise one (its first element)."""

    name = "canary_native_1d_scales"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        assert xq is not None
        w = layer.weight
        fp8 = get_format(w.spec.format).to_torch_dtype()
        a, b = xq.codes.view(fp8), w.codes.view(fp8).t()
        # The one change: no reshape to (M, 1) / (1, N); a 1-D scale acts as its element 0.
        sa, sb = xq.scale.float().reshape(-1)[0], w.scale.float().reshape(-1)[0]
        bias = None if layer.bias is None else layer.bias.to(out_dtype)
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, bias=bias, out_dtype=out_dtype)


class NativeNoFp32Bias(ControlNativePath):
    """Bias per output dtype: the kernel's fp32-output variant silently skips the bias."""

    name = "canary_native_fp32_nobias"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        if out_dtype == torch.float32:
            layer = dataclasses.replace(layer, bias=None)
        return super().forward(layer, x, out_dtype)


class NativeWeightCache(ControlNativePath):
    """Weight caching: the first call dequantizes the weight to float32 and keeps it on the
    layer; every call multiplies that cached copy instead of the codes."""

    name = "canary_native_weight_cache"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        cached = getattr(layer, "_dequantized_weight", None)
        if cached is None:
            cached = layer.weight.dequantize()
            layer._dequantized_weight = cached  # type: ignore[attr-defined]
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        a = x.float() if xq is None else xq.dequantize()
        y = a @ cached.t()
        if layer.bias is not None:
            y = y + layer.bias.float()
        return y.to(out_dtype)


# ------------------------------------------------------ activation quantization bugs
class TiesAway(ControlKernelPath):
    """Rounding ties: activations round half away from zero instead of to even."""

    name = "canary_ties_away"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return _activation_with(x, layer, encode_fn=encode_ties_away)


class Clamp240(ControlKernelPath):
    """Clamp: activations saturate at the format's 240 instead of the scheme's 224."""

    name = "canary_clamp240"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        spec = layer.scheme.activation
        assert spec is not None
        spec = dataclasses.replace(spec, clamp_max=None)
        return quantize(x, spec, None if spec.dynamic else layer.input_scale).dequantize()


class StaticScaleIgnored(ControlKernelPath):
    """Static scale ignored: a dynamic per-tensor scale is computed from each batch."""

    name = "canary_static_ignored"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        spec = layer.scheme.activation
        assert spec is not None
        return quantize(x, spec, None).dequantize()


class SpecialValuesFlushed(ControlKernelPath):
    """Special values: NaN and inf in the activation are replaced (nan_to_num) before
    quantization, so they never reach the output as NaN."""

    name = "canary_specials_flushed"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return super().activation(torch.nan_to_num(x), layer)


class AssumesContiguous(ControlKernelPath):
    """Strided input: the activation is read with row-major strides whatever its layout."""

    name = "canary_assumes_contiguous"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        m, k = x.shape
        return super().activation(x.as_strided((m, k), (k, 1)), layer)


def _whole_blocks_amax(x: torch.Tensor, spec: object) -> torch.Tensor:
    """Tile amax from whole column blocks only; a partial last block reuses the last whole
    block's amax (as a kernel that sizes its scale loop by K // block does)."""
    cols = tile_shape(spec, x.shape)[1]  # type: ignore[arg-type]
    whole = (x.shape[1] // cols) * cols
    full = tile_amax(x, spec)  # type: ignore[arg-type]
    if whole in (0, x.shape[1]):
        return full
    head = tile_amax(x[:, :whole], spec)  # type: ignore[arg-type]
    return torch.cat([head, head[:, -1:]], dim=1)


class PartialBlockScale(ControlKernelPath):
    """Partial blocks: the scale of a partial last block is the last whole block's."""

    name = "canary_partial_block"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return _activation_with(x, layer, amax_fn=_whole_blocks_amax)


class ScaleRoundingRceil(ControlKernelPath):
    """Scale rounding mode: E8M0 activation scales use rceil whatever the scheme says."""

    name = "canary_scale_rceil"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        def rceil(amax: torch.Tensor, spec: object) -> torch.Tensor:
            return compute_scale(amax, dataclasses.replace(spec, scale_rounding="rceil"))  # type: ignore[type-var]

        return _activation_with(x, layer, scale_fn=rceil)


class Bf16BeforeScale(ControlKernelPath):
    """bf16 round trip before the scale: the activation is cast to bf16 before it is
    scaled and quantized (or, unquantized, multiplied)."""

    name = "canary_bf16_before_scale"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return super().activation(x.to(torch.bfloat16).float(), layer)


class ChannelAxis(ControlKernelPath):
    """Per-channel axis: per-token activation scales are taken per K column instead."""

    name = "canary_channel_axis"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        spec = layer.scheme.activation
        assert spec is not None
        return quantize(x.t().contiguous(), spec).dequantize().t()


class Mxfp4PrefixDispatch(ControlKernelPath):
    """Seed bug, prefix dispatch of mixed MX schemes: ``startswith("w_mxfp4")`` sends every
    w_mxfp4* scheme to the pure-MXFP4 kernel, which quantizes activations as MXFP4."""

    name = "canary_mxfp4_prefix"

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        if scheme.name.startswith("w_mxfp4"):
            return Support.yes()
        return Support.no("canary_mxfp4_prefix: MXFP4 kernel only")

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        mode = layer.scheme.weight.scale_rounding
        return quantize(x, mx_spec("e2m1", mode, dynamic=True)).dequantize()


# ------------------------------------------------------------------ weight decoding
def _expand_tiled(scale: torch.Tensor, spec: object, shape: torch.Size) -> torch.Tensor:
    """Scale grid -> full tensor with ``repeat`` (tiles the grid) where ``repeat_interleave``
    (repeats each block's scale) is meant."""
    expand_scale(scale, spec, shape)  # same shape checks as the reference  # type: ignore[arg-type]
    br, bc = tile_shape(spec, shape)  # type: ignore[arg-type]
    return scale.repeat(br, bc)[: shape[0], : shape[1]]


class BlockIndex(ControlKernelPath):
    """Block-index error: weight scales are tiled (block i gets scale i mod n) instead of
    repeated per block."""

    name = "canary_block_index"

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, expand_fn=_expand_tiled)


class Fp4NibbleOrder(ControlKernelPath):
    """FP4 nibble order: packed weights are unpacked high nibble first."""

    name = "canary_fp4_nibble_order"

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        w = layer.weight
        if w.spec.format != "e2m1":
            return super().weight(layer)
        packed = pack_fp4(w.codes)
        swapped = unpack_fp4(((packed & 0xF) << 4) | (packed >> 4))
        return QuantizedTensor(swapped, w.scale, w.spec).dequantize()


def _decode_e2m1_wrong_subnormal(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    """e2m1 table with the subnormal 0.5 read as 0.25 (exponent bias applied to it too)."""
    values = decode(codes, fmt)
    if fmt != "e2m1":
        return values
    return torch.where(values.abs() == 0.5, values / 2, values)


class Fp4DecodeTable(ControlKernelPath):
    """FP4 decode table: the weight's e2m1 subnormal (+-0.5) decodes as +-0.25."""

    name = "canary_fp4_decode_table"

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, decode_fn=_decode_e2m1_wrong_subnormal)


# ------------------------------------------------ operand faults no output need show
def _flush_subnormal_codes(q: QuantizedTensor) -> QuantizedTensor:
    """``q`` with every subnormal element code replaced by +0 (code 0, zero in every
    format, fnuz included)."""
    fmt = get_format(q.spec.format)
    magnitude = decode(q.codes, q.spec.format).abs()
    subnormal = (magnitude > 0) & (magnitude < fmt.min_normal)
    codes = torch.where(subnormal, torch.zeros_like(q.codes), q.codes)
    return dataclasses.replace(q, codes=codes)


class ShownSubnormalFlush(ControlOperandsPath):
    """Subnormal flush-to-zero: activation codes that are subnormals of the element format
    become +0 (a kernel whose conversion flushes denormals), under dynamic scales too,
    where the flushed values are far too small to move an output."""

    name = "canary_shown_subnormal_ftz"

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        shown = super().quantized_operands(layer, x, out_dtype)
        act = shown.activation
        return dataclasses.replace(
            shown, activation=None if act is None else _flush_subnormal_codes(act)
        )


def _one_scale_a_binade_up(q: QuantizedTensor) -> QuantizedTensor:
    """``q`` with the first of its smallest block scales doubled: the block that matters
    least next to its row's largest, where a binade off moves the outputs least."""
    flat = q.scale.float().reshape(-1).clone()
    finite = torch.where(torch.isfinite(flat), flat, torch.full_like(flat, torch.inf))
    flat[int(torch.argmin(finite))] *= 2  # exact: a power of two
    return dataclasses.replace(q, scale=flat.reshape(q.scale.shape))


class WeightScaleBinade(ControlOperandsPath):
    """A weight scale one binade off in one block: the layout step that hands the kernel
    its weight scales doubles one (the smallest, under a far larger row maximum), so the
    output moves by that block's share only."""

    name = "canary_weight_scale_binade"

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        shown = super().quantized_operands(layer, x, out_dtype)
        return dataclasses.replace(shown, weight=_one_scale_a_binade_up(shown.weight))


# ---------------------------------------------------------- accumulation and output
class Bf16Accumulation(ControlKernelPath):
    """Accumulation precision: partial sums of 32-wide K chunks accumulate in bf16."""

    name = "canary_bf16_accumulation"

    def matmul(self, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
        for k0 in range(0, a.shape[1], 32):
            part = super().matmul(a[:, k0 : k0 + 32], w[:, k0 : k0 + 32])
            acc = (acc.float() + part).to(torch.bfloat16)
        return acc.float()


class OutDtypeViaBf16(ControlKernelPath):
    """out_dtype: the result is produced in bf16 and then cast to the requested dtype."""

    name = "canary_out_dtype_via_bf16"

    def epilogue(
        self, y: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype
    ) -> torch.Tensor:
        return super().epilogue(y, bias, torch.bfloat16).to(out_dtype)


# ----------------------------------------------- round two: inputs that show the class
def _amax_of_bf16_copy(x: torch.Tensor, spec: object) -> torch.Tensor:
    """Tile amax of the activation's bf16 copy (the elements stay float32)."""
    return tile_amax(x.to(torch.bfloat16).float(), spec)  # type: ignore[arg-type]


class MxScaleFromBf16Copy(ControlKernelPath):
    """MX scale from a bf16 copy: the block amax (and so the E8M0 scale) is taken from the
    activation rounded to bf16, the elements are divided in float32 as they should be."""

    name = "canary_mx_scale_bf16_copy"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return _activation_with(x, layer, amax_fn=_amax_of_bf16_copy)


class StaticReciprocal(ControlKernelPath):
    """Static quantization by a rounded reciprocal, undeclared: a static activation scale
    is inverted once in float32 and the elements multiplied by it (x * fl(1/s)), while the
    path declares no `reciprocal` convention."""

    name = "canary_static_reciprocal"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        spec = layer.scheme.activation
        if spec is None or spec.dynamic or spec.scale_fmt.per_tensor_level:
            return super().activation(x, layer)
        assert layer.input_scale is not None
        scale = layer.input_scale.float()
        inverse = expand_scale((1 / scale).float(), spec, x.shape)
        codes = encode((x.float() * inverse).float(), spec.format, spec.clamp_max)
        return QuantizedTensor(codes, scale, spec).dequantize()


PREFIX_COLUMNS = 1024  # one K tile of the kernel's reduction


def prefix_amax(x: torch.Tensor, spec: object) -> torch.Tensor:
    """Tile amax over the first 1024 columns only where a tile is wider than that (a
    per-token or per-tensor reduction that stops after the first K tile)."""
    if tile_shape(spec, x.shape)[1] <= PREFIX_COLUMNS:  # type: ignore[arg-type]
        return tile_amax(x, spec)  # type: ignore[arg-type]
    return tile_amax(x[:, :PREFIX_COLUMNS], spec)  # type: ignore[arg-type]


class PrefixAmax(ControlKernelPath):
    """A reduction over part of a long row: the dynamic per-token (or per-tensor) amax of
    the activation is taken over its first 1024 columns."""

    name = "canary_prefix_amax"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        return _activation_with(x, layer, amax_fn=prefix_amax)


class SaturatingFp16(ControlKernelPath):
    """Saturating fp16 output, undeclared: the epilogue clamps to +-65504 before the cast
    (the path declares the default `Numerics.overflow` "ieee", which gives +-Inf)."""

    name = "canary_fp16_saturate"

    def epilogue(
        self, y: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype
    ) -> torch.Tensor:
        if bias is not None:
            y = y + bias.float()
        if out_dtype == torch.float16:
            top = torch.finfo(torch.float16).max
            y = y.clamp(-top, top)
        return y.to(out_dtype)


def _decode_flushing_subnormals(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    """The element codec with subnormal codes read as zero (flush-to-zero)."""
    values = decode(codes, fmt)
    return torch.where(values.abs() < get_format(fmt).min_normal, torch.zeros_like(values), values)


class SubnormalFlushToZero(ControlKernelPath):
    """Subnormal flush-to-zero: element codes below the format's smallest normal decode as
    zero, in the activation (after its scales, dynamic ones included) and the weight."""

    name = "canary_subnormal_ftz"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        if xq is None:
            return x.float()
        return dequantize_with(xq, decode_fn=_decode_flushing_subnormals)

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, decode_fn=_decode_flushing_subnormals)


def _flush_subnormal_block_scales(q: QuantizedTensor) -> QuantizedTensor:
    """A two-level tensor with its block scales below the block format's smallest normal
    read as zero (a flush-to-zero conversion of the E4M3 scale bytes); others unchanged."""
    element = q.spec.scale_fmt.element
    if not q.spec.scale_fmt.per_tensor_level or element is None:
        return q
    s = q.scale.float()
    tiny = s.abs() < get_format(element).min_normal
    return dataclasses.replace(q, scale=torch.where(tiny, torch.zeros_like(s), s))


class Nvfp4BlockScaleFlush(ControlKernelPath):
    """NVFP4 block scales flushed: E4M3 block scales in E4M3's subnormal range read as zero,
    in the weight and the activation (the global scales, elements and all else as the
    control)."""

    name = "canary_nvfp4_scale_ftz"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        return x.float() if xq is None else _flush_subnormal_block_scales(xq).dequantize()

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return _flush_subnormal_block_scales(layer.weight).dequantize()


def _expand_transposed(scale: torch.Tensor, spec: object, shape: torch.Size) -> torch.Tensor:
    """The scale grid read with its two axes' strides swapped: the [rows, cols] grid's
    memory taken as [cols, rows] row-major and reshaped back (a true transpose where the
    grid is square; a column of scales, per-channel, is left as it is)."""
    swapped = scale.t().contiguous().reshape(scale.shape)
    return expand_scale(swapped, spec, shape)  # type: ignore[arg-type]


class TransposedScaleGrid(ControlKernelPath):
    """Transposed weight-scale grid: the 2-D block-scale grid is read with swapped axes."""

    name = "canary_scale_grid_transposed"

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, expand_fn=_expand_transposed)


def _expand_bf16(scale: torch.Tensor, spec: object, shape: torch.Size) -> torch.Tensor:
    """The scale grid rounded to bf16 before it is applied."""
    return expand_scale(scale.to(torch.bfloat16).float(), spec, shape)  # type: ignore[arg-type]


class ScaleInBf16(ControlKernelPath):
    """A scale applied in bf16: activation and weight scales are rounded to bf16 before they
    multiply the codes (exact for powers of two, E8M0 ones included)."""

    name = "canary_scale_bf16"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        if xq is None:
            return x.float()
        return dequantize_with(xq, expand_fn=_expand_bf16)

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, expand_fn=_expand_bf16)


# ------------------------------------------- round three: shapes where two sizes are equal
class WeightLayoutFromShape(ControlKernelPath):
    """A weight layout guessed from its shape: the weight is held [K, N] (the layout a
    column-major kernel takes) and turned back only when its last size is not K, which
    on a square weight (N == K) keeps the transposed one."""

    name = "canary_layout_from_shape"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        a = self.activation(x, layer)
        held = self.weight(layer).t().contiguous()  # [K, N]
        w = held if held.shape[1] == a.shape[1] else held.t()
        return self.epilogue(self.matmul(a, w), layer.bias, out_dtype)


def _expand_rows_by_block_k(scale: torch.Tensor, spec: object, shape: torch.Size) -> torch.Tensor:
    """The weight-scale grid read with row block index row // block_k (block_n belongs
    there; the same on square blocks), clamped to the grid as a kernel's mask would."""
    expand_scale(scale, spec, shape)  # same shape checks as the reference  # type: ignore[arg-type]
    _, bc = tile_shape(spec, shape)  # type: ignore[arg-type]
    rows = (torch.arange(shape[0]) // bc).clamp(max=scale.shape[0] - 1)
    cols = torch.arange(shape[1]) // bc
    return scale[rows][:, cols]


class BlockRowsByBlockK(ControlKernelPath):
    """Weight scales indexed by block_k where block_n belongs (row block = row // block_k)."""

    name = "canary_block_rows_by_block_k"

    def weight(self, layer: QuantizedLinear) -> torch.Tensor:
        return dequantize_with(layer.weight, expand_fn=_expand_rows_by_block_k)


HARD_WIRED_GROUP = 128


class ActivationGroup128(ControlKernelPath):
    """Activation groups of a hard-wired 128 columns, not the scheme's 1 x block_k (the
    same where block_k is 128)."""

    name = "canary_activation_group_128"

    def activation(self, x: torch.Tensor, layer: QuantizedLinear) -> torch.Tensor:
        spec = layer.scheme.activation
        if spec is None or not spec.dynamic or spec.block[0] != 1 or spec.block[1] is None:
            return super().activation(x, layer)
        grouped = dataclasses.replace(spec, block=(1, HARD_WIRED_GROUP))
        return quantize_with(x, grouped).dequantize()


SPLIT_K = 2
SPLIT_K_BLOCK = 128


class SplitKDropsTail(ControlKernelPath):
    """Split-K over whole 128-wide K blocks, cdiv(blocks, 2) blocks a piece, but the loop
    runs blocks // per_piece pieces, so a last piece with fewer blocks is dropped (none is
    where K holds at most two blocks, as every golden shape does)."""

    name = "canary_splitk_drops_tail"

    def matmul(self, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        k = a.shape[1]
        blocks = -(-k // SPLIT_K_BLOCK)
        per_piece = -(-blocks // SPLIT_K)
        width = per_piece * SPLIT_K_BLOCK
        y = torch.zeros(a.shape[0], w.shape[0])
        with full_fp32_matmul():
            for piece in range(blocks // per_piece):
                cols = slice(piece * width, min(k, (piece + 1) * width))
                y = y + a[:, cols] @ w[:, cols].t()
        return y


__all__ = [
    "ActivationGroup128",
    "AssumesContiguous",
    "Bf16Accumulation",
    "Bf16BeforeScale",
    "BlockIndex",
    "BlockRowsByBlockK",
    "ChannelAxis",
    "Clamp240",
    "ControlKernelPath",
    "ControlNativePath",
    "ControlOperandsPath",
    "Fp4DecodeTable",
    "Fp4NibbleOrder",
    "MxScaleFromBf16Copy",
    "Mxfp4PrefixDispatch",
    "NativeDropsBias",
    "NativeNoFp32Bias",
    "NativeOneDimScales",
    "NativeWeightCache",
    "OutDtypeViaBf16",
    "PartialBlockScale",
    "PrefixAmax",
    "SaturatingFp16",
    "ScaleInBf16",
    "ScaleRoundingRceil",
    "ShownSubnormalFlush",
    "SpecialValuesFlushed",
    "SplitKDropsTail",
    "StaticReciprocal",
    "StaticScaleIgnored",
    "SubnormalFlushToZero",
    "TiesAway",
    "TransposedScaleGrid",
    "WeightLayoutFromShape",
    "WeightScaleBinade",
]
