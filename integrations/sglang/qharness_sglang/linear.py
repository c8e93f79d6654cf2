"""SGLang's block-FP8 Triton GEMM as qharness linear paths, the way SGLang runs it on ROCm.

On ROCm without aiter (``SGLANG_USE_AITER`` unset, SGLang's default), no DeepGEMM,
FlashInfer or CUTLASS backend applies, so ``dispatch_w8a8_block_fp8_linear`` (auto backend)
returns ``triton_w8a8_block_fp8_linear`` (``srt/layers/quantization/fp8_utils.py``). Its
steps, which `run_block_fp8` follows (the function itself imports the serving stack):

1. ``per_token_group_quant_fp8(input_2d, block_size[1], column_major_scales=False)``: the
   Triton quantizer of `qharness_sglang.quantizer` (1 x block_k groups, float32 scales, SGLang's
   FP8 flavour and bound from its own ``is_fp8_fnuz()``);
2. ``w8a8_block_fp8_matmul_triton(q_input, weight, x_scale, weight_scale, block_size,
   output_dtype)`` (``kernels/ops/gemm/fp8_kernel.py``): the layer's block_n x block_k
   weight blocks (128 x 128 as checkpoints ship them; 128 x 64 and 64 x 128 in the
   non-square designs), the two
   scales applied per K block inside the loop (``tl.dot(a, b) * a_s[:, None] *
   b_s[None, :]``, float32), the sum converted to the output dtype in the kernel;
3. ``output += bias`` in the output dtype, then ``.to(output_dtype)`` (two roundings with a
   bias).

The kernel SGLang launches on ROCm is ``select_w8a8_block_fp8_matmul_kernel``'s choice:
its HIP variant asks ``use_w8a8_block_fp8_matmul_unrolledx4``, which computes a
comparison and returns None, so ``_w8a8_block_fp8_matmul`` runs, never the unrolled one
(read from the installed source and checked by the adapter's tests).

Two tunings (two paths):

- ``sglang_triton_block_fp8``: the config SGLang looks up, ``get_w8a8_block_fp8_configs``
  by N, K and the device name (``AMD_Instinct_MI300X`` on gfx942, ``AMD_Instinct_MI355X``
  on gfx950, `qharness_sglang.loader.ROCM_DEVICE_NAMES`); SGLang ships none for the suite's
  N and K, so its default runs (BLOCK 64 x 128 x 128, GROUP_SIZE_M 32).
- ``sglang_triton_block_fp8_tails``: the tile `TAIL_TILE` (16 x 32 x 128) as a tuned
  config: partial M blocks at M = 37 and 3, partial N blocks at N = 16 and 144. BLOCK_K
  stays 128: on ROCm SGLang's config loader raises a tuned BLOCK_SIZE_K below block_k to
  block_k (``not _is_cuda``), so no ROCm config runs two K tiles per scale group.
  Its BLOCK_K is the layer's block_k (64 in the 128 x 64 design): a wider tile spans two
  scale groups, which the kernel's scale step (group_k // BLOCK_SIZE_K tiles) cannot say.

K not a multiple of block_k is refused, as SGLang refuses it at the first forward: its
quantizer asserts ``x.shape[-1] % group_size == 0`` (the layer loads: its block-shape
validation checks tensor-parallel partitions only).

Weights enter as the loaded codes in the platform's FP8 dtype (e4m3fnuz on gfx942, as after
SGLang's ``normalize_e4m3fn_to_e4m3fnuz`` at load); codes of the other flavour are refused,
not reinterpreted. Under Triton's interpreter the quantizer's float32 -> FP8 conversion is
rounded to nearest even (`harness.fp8_conversion_rounded_to_nearest_even`) and FP8 NaN codes
read as NaN in the GEMM (`harness.fp8_nan_codes_read_as_nan`), as a GPU does; the kernel's
float32 -> bfloat16 conversion truncates there (declared in `numerics`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, ClassVar

import torch

from harness import (
    FP8_BLOCK,
    SCHEMES,
    ActivationScales,
    DispatchTable,
    Kernel,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PlatformInfo,
    QuantizedLinear,
    QuantizedOperands,
    QuantizedTensor,
    Scheme,
    Support,
    choose,
    detect_platform,
    foreign_fp8_flavour,
    fp8_conversion_rounded_to_nearest_even,
    fp8_nan_codes_read_as_nan,
    rest_emulated,
)
from qharness_sglang import ENGINE
from qharness_sglang.loader import platform_support, sglang_fp8_kernel, sglang_gemm_kernel

TAIL_TILE = (16, 32, 128)  # BLOCK_M, BLOCK_N, BLOCK_K of the _tails path (module doc)
# SGLang's GEMM takes any weight_block_size [block_n, block_k] with 1 x block_k activation
# groups; these are the ones the suites run (128x128 as checkpoints ship it, and the
# non-square designs of harness.linear.designs).
HALF_BLOCK = FP8_BLOCK // 2
WEIGHT_BLOCKS = frozenset(
    {(FP8_BLOCK, FP8_BLOCK), (FP8_BLOCK, HALF_BLOCK), (HALF_BLOCK, FP8_BLOCK)}
)
ACTIVATION_GROUPS = frozenset({(1, FP8_BLOCK), (1, HALF_BLOCK)})

# SGLang's non-finite sanitization (integrations/sglang/findings/FINDINGS.md): declared on
# the special-values cases until the reference quantizer has a rule for it.
NONFINITE_SANITIZED = (
    "SGLang 0.5.23 per_token_group_quant_fp8 (Triton, _per_token_group_quant_8bit) sanitizes "
    "non-finite activations by design: tl.max leaves NaN out of the group amax and "
    "tl.clamp(propagate_nan=NONE) maps a NaN element to -fp8_max, so a NaN row comes out "
    "finite; an Inf element gives the scale Inf, the Inf element -fp8_max and its finite "
    "neighbours 0, so the row comes out +-Inf where the reference gives NaN. SGLang's "
    "maintainers state the contract that non-finite inputs never reach an FP8 NaN code "
    "(sgl-project/sglang#31712 review, #32296): a convention the reference has no rule for "
    "yet, not a bug (integrations/sglang/findings/sglang_nonfinite_group_quant.py)"
)
SPECIAL_NONFINITE = frozenset({"nan", "pos_inf", "neg_inf"})

BLOCK_FP8 = Kernel(
    "w8a8_block_fp8_matmul_triton",
    OperandContract(
        formats=frozenset({"e4m3fn", "e4m3fnuz"}),
        scale_format="fp32",
        weight_blocks=WEIGHT_BLOCKS,
        activation_blocks=ACTIVATION_GROUPS,
    ),
    ActivationScales(
        static=frozenset(),
        why="SGLang quantizes the activation per 1 x block_k group at each forward (dynamic)",
    ),
    probe="triton",
)
# Architecture -> the scheme the kernel runs there: SGLang's FP8 flavour on it (its
# is_fp8_fnuz(): "gfx94" in gcnArchName); every other scheme is not this path's.
BLOCK_FP8_TABLE: DispatchTable = {
    "gfx942": rest_emulated({BLOCK_FP8.name: frozenset({"fp8_per_block_fnuz"})}, SCHEMES),
    "gfx950": rest_emulated({BLOCK_FP8.name: frozenset({"fp8_per_block"})}, SCHEMES),
}


@contextmanager
def block_config(gemm: Any, tile: tuple[int, int, int] | None) -> Iterator[None]:
    """``tile`` as the tuned config SGLang's GEMM looks up (a config file would hold it);
    None: SGLang's own lookup."""
    if tile is None:
        yield
        return
    m, n, k = tile
    config = {
        "BLOCK_SIZE_M": m,
        "BLOCK_SIZE_N": n,
        "BLOCK_SIZE_K": k,
        "GROUP_SIZE_M": 2,
        "num_warps": 4,
        "num_stages": 2,
    }
    saved = gemm.get_w8a8_block_fp8_configs
    gemm.get_w8a8_block_fp8_configs = lambda *args: {1: config}
    try:
        yield
    finally:
        gemm.get_w8a8_block_fp8_configs = saved


def _fp8_weight(layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
    """The loaded weight codes [N, K] in the platform's FP8 dtype (other flavour refused)."""
    held = layer.weight.spec.format
    if f"float8_{held}" != str(dtype).removeprefix("torch."):
        raise ValueError(f"weight codes are {held}; this platform's kernels take {dtype}")
    return layer.weight.codes.contiguous().view(dtype)


def quantize_activation(
    x: torch.Tensor, platform: PlatformInfo, group: int = FP8_BLOCK
) -> tuple[torch.Tensor, Any]:
    """Step 1 (module doc): SGLang's per_token_group_quant_fp8 on the row-major activation
    in groups of ``group`` (block_size[1]; SGLang's layers hand it contiguous rows; the
    suite's views are copied first)."""
    quant = sglang_fp8_kernel(platform)
    conversion = fp8_conversion_rounded_to_nearest_even() if platform.simulated else nullcontext()
    with conversion:
        return quant.per_token_group_quant_fp8(  # type: ignore[no-any-return]
            x.float().contiguous(), group, column_major_scales=False
        )


def run_block_fp8(
    layer: QuantizedLinear,
    x: torch.Tensor,
    out_dtype: torch.dtype,
    tile: tuple[int, int, int] | None,
) -> torch.Tensor:
    """``triton_w8a8_block_fp8_linear``'s steps (module doc) with ``output_dtype`` the
    model dtype ``out_dtype``; leading dimensions flattened and restored as it does."""
    platform = detect_platform()
    output_shape = [*x.shape[:-1], layer.weight.codes.shape[0]]
    block = layer.weight_block_size()
    q_input, x_scale = quantize_activation(x.reshape(-1, x.shape[-1]), platform, block[1])
    if tile is not None:  # BLOCK_K is block_k on ROCm (module doc)
        tile = (tile[0], tile[1], block[1])
    gemm = sglang_gemm_kernel(platform)
    weight = _fp8_weight(layer, q_input.dtype)
    weight_scale = layer.weight.scale.float().contiguous()
    nan_codes = fp8_nan_codes_read_as_nan() if platform.simulated else nullcontext()
    with block_config(gemm, tile), nan_codes:
        output = gemm.w8a8_block_fp8_matmul_triton(
            q_input, weight, x_scale, weight_scale, block, output_dtype=out_dtype
        )
    if layer.bias is not None:
        output += layer.bias.to(out_dtype)
    return output.to(dtype=out_dtype).view(*output_shape)  # type: ignore[no-any-return]


class SglangTritonBlockFp8Path(LinearPathBase):
    """``w8a8_block_fp8_matmul_triton`` under the config SGLang looks up (module doc)."""

    name = "sglang_triton_block_fp8"
    engine = ENGINE
    runs_kernel_source = True  # Triton source: interpreted on a simulated arch
    takes_leading_dims = True  # input.view(-1, K) ... .view(*output_shape), as SGLang's
    tile: ClassVar[tuple[int, int, int] | None] = None  # None: SGLang's own tuning choice
    # the activation quantizer's (qharness_sglang.quantizer): eps 1e-10, y * (1 / y_s),
    # fp8_max 224 for e4m3fnuz
    conventions: frozenset[str] = frozenset(
        {"reciprocal_scale", "amax_floor_1e-10", "fnuz_clamp_224"}
    )
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            NONFINITE_SANITIZED, suites=frozenset({"special_values"}), cases=SPECIAL_NONFINITE
        ),
    )

    @property
    def kernels(self) -> dict[str, Kernel]:
        return {BLOCK_FP8.name: BLOCK_FP8}

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        config = "sglang-tuning" if self.tile is None else "x".join(map(str, self.tile))
        return f"{BLOCK_FP8.name}[{config}]"

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        where = platform_support(self.name, platform)
        if not where.ok:
            return where
        choice = choose(
            BLOCK_FP8_TABLE, self.kernels, platform.arch, scheme, f"{self.name} dispatch", __name__
        )
        if choice.kernel is None:
            return Support.no(f"{self.name}: {choice.reason}")
        foreign = foreign_fp8_flavour(scheme, platform)
        if foreign:  # SGLang normalizes e4m3fn checkpoints to e4m3fnuz on gfx94x at load
            return Support.no(f"{self.name}: {foreign}")
        group = scheme.activation.block[1] if scheme.activation else None
        if group is None or problem.k % group:
            return Support.no(
                f"{self.name}: K % {group} == 0 (SGLang's per_token_group_quant_fp8 "
                f"asserts it at the first forward), K = {problem.k}"
            )
        return Support.yes()

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Per K block: float32 dot, two scale multiplies, float32 add; the sum rounded to
        the output dtype in the kernel (toward zero for bf16 under the interpreter, whose
        float32 -> bfloat16 conversion truncates), then ``output += bias`` by torch in the
        output dtype (to nearest): SGLang's ``triton_w8a8_block_fp8_linear`` step order,
        declared as a convention (docs/CONVENTIONS.md)."""
        interpreted = detect_platform().simulated == "triton-interpret"
        truncates = interpreted and problem.out_dtype == torch.bfloat16
        return Numerics(
            out_dtype=problem.out_dtype,
            epilogue_roundings=2,
            output_roundings=2 if problem.bias else 1,
            roundings_before_bias=1 if problem.bias else 0,
            rounding_mode="toward_zero" if truncates else "nearest",
        )

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        return run_block_fp8(layer, x, out_dtype, self.tile)

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """The activation SGLang's quantizer hands the GEMM (its FP8 bytes as codes, the
        row-major [M, K / 128] scales) and the loaded weight it multiplies as it is."""
        act = layer.scheme.activation
        if act is None:
            raise ValueError(f"{self.name}: {layer.scheme.name} has no activation quantization")
        q_input, x_scale = quantize_activation(x, detect_platform(), layer.weight_block_size()[1])
        return QuantizedOperands(
            QuantizedTensor(q_input.view(torch.uint8), x_scale.float(), act), layer.weight
        )


class SglangTritonBlockFp8TailsPath(SglangTritonBlockFp8Path):
    """``w8a8_block_fp8_matmul_triton`` with the tile `TAIL_TILE` as its tuned config."""

    name = "sglang_triton_block_fp8_tails"
    tile = TAIL_TILE
