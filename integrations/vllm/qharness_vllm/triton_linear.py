"""vLLM's Triton FP8 GEMM kernels as qharness linear paths (ROCm's Triton kernels).

Two kernels, each under two tuning configurations (four paths):

- ``vllm_triton_scaled_mm`` / ``vllm_triton_scaled_mm_tails``:
  ``compressed_tensors/triton_scaled_mm.triton_scaled_mm``, per-tensor or per-token
  activation scale x per-tensor or per-channel weight scale, applied after the K loop
  (``scale_a * acc``, then ``scale_b * acc``, then the bias, in float32; one rounding to
  the output). vLLM reaches it on ROCm through ``ops.cutlass_scaled_mm`` (its ROCm branch)
  and `TritonFP8ScaledMMLinearKernel` (batch-invariant mode); on CUDA only when N or K is
  not a multiple of 16, which no suite shape is (CUTLASS there), so sm_90 does not run it.
- ``vllm_triton_block_fp8`` / ``vllm_triton_block_fp8_tails``:
  ``fp8_utils.w8a8_triton_block_scaled_mm``, the layer's block_n x block_k weight blocks
  (``block_size``: 128x128 as checkpoints ship them, 128x64 and 64x128 in the non-square
  designs) x 1 x block_k activation groups, the scales applied per K block inside the
  loop; the tuned-config paths (vLLM's block_shape=[128,128] files) run 128x128 blocks
  only. The kernel vLLM's ROCm block-FP8
  selection (`TritonFp8BlockScaledMMKernel`, after aiter, which is off by default) runs.
  As `Fp8BlockScaledMMLinearKernel.apply_weights` does, the product is rounded to the
  output dtype and the bias added after it in that dtype (two roundings with a bias). On
  CUDA vLLM selects DeepGEMM/CUTLASS first, so sm_90 does not run it.

Activations reach vLLM as the suite's float32 tensors (bf16-valued: what a bf16 or float32
model hands the layer; `QuantFP8` computes in float32 from any float dtype, and fp16 cannot
hold the block schemes' per-group spread of 2^17). They are quantized as vLLM's kernels do
it, with vLLM's `QuantFP8` (dispatched by vLLM: ``forward_native`` on this CPU; the HIP/CUDA
quant kernel on a GPU), under the simulated platform's FP8 flavour
(`qharness_vllm.triton_platform.simulated_platform`). Under the interpreter each call runs
with FP8 NaN codes read as NaN (`harness.fp8_nan_codes_read_as_nan`; the interpreter's own
widening reads them as finite numbers), so the special-values suite judges the kernels.
Weights enter as the loaded codes in the platform's FP8 dtype (e4m3fnuz on gfx942, as after
vLLM's fnuz normalization), transposed the way vLLM's ``process_weights_after_loading``
leaves them for ``triton_scaled_mm`` ([K, N] view).

Tuning: ``triton_scaled_mm`` picks its tile from vLLM's heuristic (``use_heuristic=True``,
what every vLLM caller uses); ``w8a8_triton_block_scaled_mm`` reads a tuned JSON config
named by N, K and the device name, and vLLM ships none for the suite's N and K on any
device (checked by ``integrations/vllm/tests/test_vllm_triton.py``), so its default
(64, 128, 128, GROUP_SIZE_M 32) runs. The ``_tails`` paths rerun each kernel with a tile of
16 x 32 x 64 (`TAIL_TILE`): BLOCK_K = 64 leaves a partial K block at K = 176, BLOCK_N = 32
a partial N block at N = 16 and 144, BLOCK_M = 16 a partial M block at M = 37 and 3, and
the block kernel then takes two K iterations per 128-wide scale group. Neither kernel has a
split-K variant.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, ClassVar

import torch

from harness import (
    E8M0,
    FP8_BLOCK,
    SCHEMES,
    WHOLE,
    ActivationScales,
    DispatchRow,
    DispatchTable,
    FindingCase,
    Kernel,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PlatformInfo,
    PluginFamily,
    QuantizedLinear,
    Scheme,
    Support,
    choose,
    foreign_fp8_flavour,
    fp8_nan_codes_read_as_nan,
    rest_emulated,
)
from qharness_vllm import ENGINE
from qharness_vllm.triton_platform import (
    fp8_dtype_for,
    interpreting,
    kernel_rounding_mode,
    simulated_arch,
    simulated_platform,
    target_arch,
    triton_unavailable,
)

FP8_FORMATS = frozenset({"e4m3fn", "e4m3fnuz"})
PER_TENSOR = (WHOLE, WHOLE)
PER_ROW = (1, WHOLE)
TAIL_TILE = (16, 32, 64)  # BLOCK_M, BLOCK_N, BLOCK_K of the _tails paths (module doc)
# The block kernel takes any weight block [block_n, block_k] (its ``block_size``) with
# 1 x block_k activation groups; these are the ones the suites run (128x128 as checkpoints
# ship it, and the non-square designs of harness.linear.designs).
HALF_BLOCK = FP8_BLOCK // 2
WEIGHT_BLOCKS = frozenset(
    {(FP8_BLOCK, FP8_BLOCK), (FP8_BLOCK, HALF_BLOCK), (HALF_BLOCK, FP8_BLOCK)}
)
ACTIVATION_GROUPS = frozenset({(1, FP8_BLOCK), (1, HALF_BLOCK)})


# vLLM's Triton GEMMs (probe "triton": the interpreter or a GPU runs them). The per-tensor
# and per-row kernel runs a static activation scale only per tensor; the block kernel runs
# dynamic activation scales only.
SCALED_MM = Kernel(
    "triton_scaled_mm",
    OperandContract(
        formats=FP8_FORMATS,
        scale_format="fp32",
        weight_blocks=frozenset({PER_TENSOR, PER_ROW}),
        activation_blocks=frozenset({PER_TENSOR, PER_ROW}),
    ),
    ActivationScales(
        static=frozenset({PER_TENSOR}), why="vLLM's static activation scales are per-tensor"
    ),
    probe="triton",
)
BLOCK_FP8 = Kernel(
    "w8a8_triton_block_scaled_mm",
    OperandContract(
        formats=FP8_FORMATS,
        scale_format="fp32",
        weight_blocks=WEIGHT_BLOCKS,
        activation_blocks=ACTIVATION_GROUPS,
    ),
    ActivationScales(
        static=frozenset(), why="vLLM runs this kernel with dynamic activation scales only"
    ),
    probe="triton",
)
# The same kernel on a UE8M0 checkpoint: its E8M0 weight scales decoded to float32 by
# vLLM's _upcast_e8m0_to_fp32 first, its activation scales rounded up to powers of two by
# QuantFP8(use_ue8m0=True).
BLOCK_FP8_UE8M0 = Kernel(
    "w8a8_triton_block_scaled_mm.ue8m0",
    OperandContract(
        formats=frozenset({"e4m3fn"}),
        scale_format="e8m0",
        weight_blocks=WEIGHT_BLOCKS,
        activation_blocks=ACTIVATION_GROUPS,
    ),
    ActivationScales(
        static=frozenset(), why="vLLM runs this kernel with dynamic activation scales only"
    ),
    probe="triton",
)
KERNELS: dict[str, Kernel] = {k.name: k for k in (SCALED_MM, BLOCK_FP8, BLOCK_FP8_UE8M0)}


def _row(kernel: str, runs: frozenset[str]) -> DispatchRow:
    """A dispatch row: ``runs`` to the kernel, every other registered scheme not run."""
    return rest_emulated({kernel: runs} if runs else {}, SCHEMES)


# Keyed by GPU architecture, the simulated one under simulation (`target_arch`), not by
# platform_key: the same kernel source runs on the real and the simulated arch.
# Architecture -> the schemes each kernel runs there: the platform's FP8 flavour (vLLM
# normalizes e4m3fn checkpoints to e4m3fnuz on gfx942 before these kernels see them);
# sm_90 runs neither (module doc). EMULATE: this path does not run the scheme there.
_NONE: frozenset[str] = frozenset()
SCALED_MM_TABLE: DispatchTable = {
    "gfx942": _row(
        SCALED_MM.name,
        frozenset(
            {
                "fp8_per_tensor_fnuz",
                "fp8_per_tensor_fnuz_clamp224",
                "fp8_per_channel_fnuz",
                "fp8_per_channel_fnuz_clamp224",
                "fp8_w_per_channel_a_static_fnuz",
            }
        ),
    ),
    "gfx950": _row(
        SCALED_MM.name,
        frozenset({"fp8_per_tensor", "fp8_per_channel", "fp8_w_per_channel_a_static"}),
    ),
    "sm_90": _row(SCALED_MM.name, _NONE),
}
BLOCK_FP8_TABLE: DispatchTable = {
    "gfx942": _row(BLOCK_FP8.name, frozenset({"fp8_per_block_fnuz"})),
    # UE8M0 (power-of-two) scales are e4m3fn's: gfx950's
    "gfx950": rest_emulated(
        {
            BLOCK_FP8.name: frozenset({"fp8_per_block"}),
            BLOCK_FP8_UE8M0.name: frozenset({"fp8_per_block_ue8m0"}),
        },
        SCHEMES,
    ),
    "sm_90": _row(BLOCK_FP8.name, _NONE),
}
WHY_NOT_ON: dict[str, str] = {
    "sm_90": "on CUDA vLLM selects CUTLASS/DeepGEMM for these FP8 GEMMs, not this Triton kernel",
}


# --------------------------------------------------------------------- vLLM calls
def _fp8_weight(layer: QuantizedLinear, dtype: torch.dtype) -> torch.Tensor:
    """The loaded weight codes [N, K] as vLLM holds them: the platform's FP8 dtype. Codes
    of the other e4m3 flavour are refused, not reinterpreted (their values differ by 2)."""
    held = layer.weight.spec.format
    if f"float8_{held}" != str(dtype).removeprefix("torch."):
        raise ValueError(f"weight codes are {held}; this platform's kernels take {dtype}")
    return layer.weight.codes.contiguous().view(dtype)


def _quant_fp8(static: bool, group: tuple[int, int], ue8m0: bool = False) -> Any:
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
    from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

    with set_current_vllm_config(VllmConfig()):  # CustomOps read the config when built
        return QuantFP8(static=static, group_shape=GroupShape(*group), use_ue8m0=ue8m0)


_GROUPS: dict[tuple[int | None, int | None], tuple[int, int]] = {
    PER_TENSOR: (-1, -1),  # GroupShape.PER_TENSOR
    PER_ROW: (1, -1),  # GroupShape.PER_TOKEN
    **{group: group for group in ACTIVATION_GROUPS},  # 1 x block_k, the weight's block_k
}


def quantize_activation(layer: QuantizedLinear, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """vLLM's QuantFP8 on the activation, as the kernel's linear method calls it."""
    act = layer.scheme.activation
    assert act is not None
    ue8m0 = act.scale_fmt is E8M0  # power-of-two scales: vLLM's use_ue8m0
    quant = _quant_fp8(static=not act.dynamic, group=_GROUPS[act.block], ue8m0=ue8m0)
    if act.dynamic:
        return quant(x)  # type: ignore[no-any-return]
    assert layer.input_scale is not None
    return quant(x, layer.input_scale.float().reshape(1))  # type: ignore[no-any-return]


def run_scaled_mm(
    layer: QuantizedLinear,
    x: torch.Tensor,
    out_dtype: torch.dtype,
    fp8: torch.dtype,
    tile: tuple[int, int, int] | None,
) -> torch.Tensor:
    """`TritonFP8ScaledMMLinearKernel.apply_weights`' steps: QuantFP8, then triton_scaled_mm
    on the [K, N] weight view, the bias in the model dtype; ``tile`` None: vLLM's heuristic."""
    from vllm.model_executor.layers.quantization.compressed_tensors.triton_scaled_mm import (
        triton_scaled_mm,
    )

    x_q, x_s = quantize_activation(layer, x)
    w = _fp8_weight(layer, fp8).t()
    w_s = layer.weight.scale.float().reshape(-1, 1)
    bias = None if layer.bias is None else layer.bias.to(out_dtype)
    if tile is None:
        return triton_scaled_mm(x_q, w, x_s, w_s, out_dtype, bias)  # type: ignore[arg-type]
    m, n, k = tile
    return triton_scaled_mm(
        x_q,
        w,
        x_s,
        w_s,
        out_dtype,  # type: ignore[arg-type]  # vLLM annotates type[torch.dtype]
        bias,
        m,
        n,
        k,
        use_heuristic=False,
    )


def tile_config(tile: tuple[int, int, int]) -> dict[str, int]:
    """A tuned-config entry (as vLLM's JSON files hold them) for a BLOCK_M x N x K tile."""
    m, n, k = tile
    return {
        "BLOCK_SIZE_M": m,
        "BLOCK_SIZE_N": n,
        "BLOCK_SIZE_K": k,
        "GROUP_SIZE_M": 2,
        "num_warps": 4,
        "num_stages": 2,
    }


@contextmanager
def block_config(config: dict[str, int] | None) -> Iterator[None]:
    """``config`` as the tuned config vLLM's block kernel looks up (a config file would
    hold it); None: vLLM's own lookup."""
    if config is None:
        yield
        return
    from vllm.model_executor.layers.quantization.utils import fp8_utils

    saved = fp8_utils.get_w8a8_block_fp8_configs
    fp8_utils.get_w8a8_block_fp8_configs = lambda *args: {1: config}  # type: ignore[assignment]
    try:
        yield
    finally:
        fp8_utils.get_w8a8_block_fp8_configs = saved


def _block_weight_scales(layer: QuantizedLinear) -> torch.Tensor:
    """The weight's block scales as float32, as vLLM hands them to the Triton kernel: a
    UE8M0 checkpoint's E8M0 bytes (float8_e8m0fnu) decoded by vLLM's own
    `_upcast_e8m0_to_fp32`, as its CPU and aiter kernels do at load."""
    spec = layer.weight.spec
    if spec.scale_fmt is not E8M0:
        return layer.weight.scale.float().contiguous()
    from vllm.model_executor.layers.quantization.utils.fp8_utils import _upcast_e8m0_to_fp32

    codes = spec.scale_fmt.store(layer.weight.scale.float()).to(torch.uint8).contiguous()
    return _upcast_e8m0_to_fp32(codes.view(torch.float8_e8m0fnu)).float().contiguous()


def run_block_fp8(
    layer: QuantizedLinear,
    x: torch.Tensor,
    out_dtype: torch.dtype,
    fp8: torch.dtype,
    config: dict[str, int] | None,
    contiguous_codes: bool = False,
) -> torch.Tensor:
    """`Fp8BlockScaledMMLinearKernel.apply_weights` with `TritonFp8BlockScaledMMKernel`:
    QuantFP8 per 1 x block_k group, the block GEMM with the layer's [block_n, block_k]
    into the output dtype, then ``+ bias``; ``config`` None: vLLM's own config lookup."""
    from vllm.model_executor.layers.quantization.utils import fp8_utils

    # vLLM asserts row-contiguous activations here (per_token_group_quant_fp8:
    # x.stride(-1) == 1; w8a8_triton_block_scaled_mm: A.is_contiguous()); its layers pass
    # contiguous ones, so the suite's transposed and strided views are copied first.
    x_q, x_s = quantize_activation(layer, x.contiguous())
    if contiguous_codes:  # past vLLM's assertion on K % 128 != 0 (_K_NOT_128 below)
        x_q = x_q.contiguous()
    w = _fp8_weight(layer, fp8)
    w_s = _block_weight_scales(layer)
    with block_config(config):
        out = fp8_utils.w8a8_triton_block_scaled_mm(
            x_q, w, x_s, w_s, layer.weight_block_size(), out_dtype
        )
    if layer.bias is not None:
        out = out + layer.bias.to(out_dtype)
    return out.to(out_dtype)


# -------------------------------------------------------------------------- paths
class _VllmTritonPath(LinearPathBase):
    """One vLLM Triton GEMM, run as vLLM runs it, on a GPU or under the interpreter."""

    engine = ENGINE
    runs_kernel_source = True  # Triton source: interpreted on a simulated arch
    kernel: ClassVar[Kernel]
    table: ClassVar[DispatchTable]
    tile: ClassVar[tuple[int, int, int] | None] = None  # None: vLLM's own tuning choice
    # QuantFP8 (module doc): dynamic scales bounded below by 1/(fp8_max*512) (power-of-two
    # scales: the bound rounded up too); fnuz at 224
    conventions: frozenset[str] = frozenset(
        {"min_scale_1_over_512max", "ue8m0_min_scale_1_over_512max", "fnuz_clamp_224"}
    )

    @property
    def kernels(self) -> dict[str, Kernel]:
        return {self.kernel.name: self.kernel}

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        config = "vllm-tuning" if self.tile is None else "x".join(map(str, self.tile))
        return f"{self.kernel.name}[{config}]"

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        why = triton_unavailable(platform)
        if why:
            return Support.no(f"{self.name}: {why}")
        arch = target_arch(platform)
        if arch in WHY_NOT_ON:
            return Support.no(f"{self.name}: {WHY_NOT_ON[arch]}")
        choice = choose(self.table, self.kernels, arch, scheme, f"{self.name} dispatch", __name__)
        if choice.kernel is None:
            return Support.no(f"{self.name}: {choice.reason}")
        foreign = foreign_fp8_flavour(scheme, platform)
        if foreign:  # vLLM would have normalized the checkpoint to the arch's flavour
            return Support.no(f"{self.name}: {foreign}")
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        arch = simulated_arch()
        fp8 = fp8_dtype_for(arch or "")
        # under the interpreter, FP8 NaN codes read as NaN, as the formats define them
        # (docs/ENGINES-ADAPTERS.md, the interpreter's numerics)
        nan_codes = fp8_nan_codes_read_as_nan() if arch and interpreting() else nullcontext()
        with simulated_platform(arch), nan_codes:
            return self._run(layer, x.float(), out_dtype, fp8)

    def _run(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype, fp8: torch.dtype
    ) -> torch.Tensor:
        raise NotImplementedError


class VllmTritonScaledMMPath(_VllmTritonPath):
    """``triton_scaled_mm`` under vLLM's tile heuristic."""

    name = "vllm_triton_scaled_mm"
    kernel = SCALED_MM
    table = SCALED_MM_TABLE
    conventions = frozenset({"min_scale_1_over_512max", "reciprocal_scale", "fnuz_clamp_224"})
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """float32 K sum, two float32 scale multiplies, float32 bias add, one rounding in
        the kernel (toward zero under the interpreter's bf16 truncation: triton_platform)."""
        return Numerics(
            out_dtype=problem.out_dtype,
            epilogue_roundings=2,
            rounding_mode=kernel_rounding_mode(problem.out_dtype),
        )

    def _run(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype, fp8: torch.dtype
    ) -> torch.Tensor:
        return run_scaled_mm(layer, x, out_dtype, fp8, self.tile)


class VllmTritonScaledMMTailsPath(VllmTritonScaledMMPath):
    """``triton_scaled_mm`` with the tile `TAIL_TILE` (partial M, N and K blocks)."""

    name = "vllm_triton_scaled_mm_tails"
    tile = TAIL_TILE


# docs/ENGINE-FINDINGS.md (scripts/vllm_triton/block_fp8_k_tail.py)
_K_NOT_128 = (
    "K not a multiple of 128 with 128x128 FP8 blocks: vLLM loads the layer "
    "(validate_fp8_block_shape checks tensor-parallel partitions only), but its activation "
    "quant refuses it at the first forward: per_token_group_quant_fp8 (the GPU path) asserts "
    "K % 128 == 0, and QuantFP8's native group quant pads, slices back and returns a "
    "non-contiguous tensor that w8a8_triton_block_scaled_mm's A.is_contiguous() assertion "
    "rejects (an asserted precondition, not a wrong result)"
)
# integrations/vllm/findings/FINDINGS.md (vllm_ue8m0_group_floor_order.py)
_UE8M0_FLOOR_ORDER = (
    "vLLM 0.32 QuantFP8 with use_ue8m0 rounds a group's scale up to a power of two and then "
    "applies the floor 1 / (448 * 512), so a group whose amax / 448 is below the floor gets "
    "the non-power-of-two scale 1 / 229376 instead of 2^-17 (the fix, vllm-project/vllm#58032, "
    "floors first) (integrations/vllm/findings/vllm_ue8m0_group_floor_order.py)"
)
BLOCK_SCHEMES = frozenset({"fp8_per_block", "fp8_per_block_fnuz", "fp8_per_block_ue8m0"})


def _k_not_multiple_of_128(case: FindingCase) -> bool:
    return case.problem is not None and case.problem.k % 128 != 0


class VllmTritonBlockFp8Path(_VllmTritonPath):
    """``w8a8_triton_block_scaled_mm`` under the config vLLM looks up (its default here)."""

    name = "vllm_triton_block_fp8"
    kernel = BLOCK_FP8
    table = BLOCK_FP8_TABLE

    @property
    def kernels(self) -> dict[str, Kernel]:
        return {k.name: k for k in (BLOCK_FP8, BLOCK_FP8_UE8M0)}

    contiguous_codes: ClassVar[bool] = False
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(_K_NOT_128, schemes=BLOCK_SCHEMES, when=_k_not_multiple_of_128),
        KnownFinding(
            _UE8M0_FLOOR_ORDER,
            schemes=frozenset({"fp8_per_block_ue8m0"}),
            behaves_as=frozenset({"ue8m0_floor_after_rounding"}),
            replaces=frozenset({"ue8m0_min_scale_1_over_512max"}),
        ),
    )

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Per K block: float32 dot, two scale multiplies, float32 add; the sum rounded to
        the output dtype in the kernel (toward zero under the interpreter's bf16
        truncation: triton_platform), then the bias added by torch in the output dtype
        (to nearest; the declaration's one mode then bounds both roundings as truncations).

        vLLM's step order, declared as a convention, not a finding: its
        ``Fp8BlockScaledMMLinearKernel.apply_weights`` takes ``apply_block_scaled_mm``'s
        output, already in the model dtype, and returns ``output + bias``
        (docs/ENGINE-FINDINGS.md, scripts/vllm_triton/block_fp8_bias_after_rounding.py). The
        in-kernel roundings therefore err relative to the product, not to the result."""
        return Numerics(
            out_dtype=problem.out_dtype,
            epilogue_roundings=2,
            output_roundings=2 if problem.bias else 1,
            roundings_before_bias=1 if problem.bias else 0,
            rounding_mode=kernel_rounding_mode(problem.out_dtype),
        )

    def launch_config(self) -> dict[str, int] | None:
        """The tuned config the kernel runs under (None: vLLM's lookup)."""
        return None if self.tile is None else tile_config(self.tile)

    def _run(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype, fp8: torch.dtype
    ) -> torch.Tensor:
        config = self.launch_config()
        return run_block_fp8(layer, x, out_dtype, fp8, config, self.contiguous_codes)


class VllmTritonBlockFp8TailsPath(VllmTritonBlockFp8Path):
    """``w8a8_triton_block_scaled_mm`` with the tile `TAIL_TILE` as its tuned config.

    Where vLLM stops at its contiguity assertion (K % 128 != 0, `_K_NOT_128`), this path
    hands the kernel a contiguous copy of vLLM's quantized activation, so that the kernel's
    own partial-K handling (masked loads, the last scale group) runs at K = 176."""

    name = "vllm_triton_block_fp8_tails"
    tile = TAIL_TILE
    contiguous_codes = True
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            _UE8M0_FLOOR_ORDER,
            schemes=frozenset({"fp8_per_block_ue8m0"}),
            behaves_as=frozenset({"ue8m0_floor_after_rounding"}),
            replaces=frozenset({"ue8m0_min_scale_1_over_512max"}),
        ),
    )


# ------------------------------------------------------------- tuned launch configs
# vLLM's tuned configs for w8a8_triton_block_scaled_mm: JSON files beside fp8_utils, named
# by N, K, device and block shape, each mapping batch sizes to a launch config.
TUNED_CONFIGS_GLOB = "N=*,K=*,device_name=*,dtype=fp8_w8a8,{shape}"
TUNED_CONFIGS_SHAPE = "block_shape=[{n},{k}].json"  # brackets: escaped for the glob
TILE_KEYS = ("BLOCK_SIZE_K", "BLOCK_SIZE_N")  # what decides which scales a tile reads
ORDER_KEYS = ("BLOCK_SIZE_M", "GROUP_SIZE_M", "num_warps", "num_stages")


def tuned_block_configs(
    block: tuple[int, int] = (FP8_BLOCK, FP8_BLOCK),
) -> list[dict[str, int]]:
    """One launch config per distinct (BLOCK_SIZE_K, BLOCK_SIZE_N) in the tuned files the
    installed vLLM ships for ``block`` (on any device): of each, the one with the smallest
    BLOCK_SIZE_M (then GROUP_SIZE_M, warps, stages). Read from vLLM's package folder
    without importing vLLM; empty where vLLM is not installed."""
    import glob
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.find_spec("vllm")
    if spec is None or spec.origin is None:
        return []
    folder = Path(spec.origin).parent / "model_executor/layers/quantization/utils/configs"
    shape = glob.escape(TUNED_CONFIGS_SHAPE.format(n=block[0], k=block[1]))
    pattern = TUNED_CONFIGS_GLOB.format(shape=shape)
    best: dict[tuple[int, ...], dict[str, int]] = {}
    for file in sorted(folder.glob(pattern)):
        for config in json.loads(file.read_text()).values():
            tile = tuple(int(config[key]) for key in TILE_KEYS)
            order = tuple(int(config.get(key, 0)) for key in ORDER_KEYS)
            kept = best.get(tile)
            if kept is None or order < tuple(int(kept.get(key, 0)) for key in ORDER_KEYS):
                best[tile] = {key: int(value) for key, value in config.items()}
    return [best[tile] for tile in sorted(best)]


# integrations/vllm/findings/FINDINGS.md (vllm_block_fp8_tile_spans_groups.py)
_TILE_SPANS_GROUPS = (
    "vLLM 0.32 w8a8_triton_block_scaled_mm reads one activation and one weight scale per "
    "K tile (offs_ks = k * BLOCK_SIZE_K // group_k) and launches the tuned config it "
    "looks up unchanged, so under a tuned BLOCK_SIZE_K wider than the 128-wide scale "
    "group (256 in its MI300X files) each tile's second group is scaled by the first "
    "group's scales (vllm-project/vllm#52576, fix #52577 clamps BLOCK_SIZE_K) "
    "(integrations/vllm/findings/vllm_block_fp8_tile_spans_groups.py)"
)


def _spans_two_groups(case: FindingCase) -> bool:
    return case.problem is not None and case.problem.k > FP8_BLOCK


class VllmTritonBlockFp8TunedPath(VllmTritonBlockFp8Path):
    """``w8a8_triton_block_scaled_mm`` under one of vLLM's tuned launch configs
    (`tuned_block_configs`): a tile a file picks for some N, K, batch size and device is
    a tile the kernel must run correctly on any. Not an entry point itself: the family
    `TUNED_CONFIG_PATHS` builds one per config the installed vLLM ships."""

    def __init__(self, config: dict[str, int]) -> None:
        self.config = dict(config)
        k, n = (self.config[key] for key in TILE_KEYS)
        self.name = f"vllm_triton_block_fp8_tuned_k{k}n{n}"
        findings = [KnownFinding(_K_NOT_128, schemes=BLOCK_SCHEMES, when=_k_not_multiple_of_128)]
        if k > FP8_BLOCK:  # a K tile spans two scale groups
            findings.append(
                KnownFinding(_TILE_SPANS_GROUPS, schemes=BLOCK_SCHEMES, when=_spans_two_groups)
            )
        findings += [f for f in VllmTritonBlockFp8Path.known_findings if f.text != _K_NOT_128]
        self.known_findings = tuple(findings)  # type: ignore[misc]

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        if scheme.weight.block != (FP8_BLOCK, FP8_BLOCK):  # vLLM's lookup is by block shape
            return Support.no(
                f"{self.name}: a config of vLLM's block_shape=[{FP8_BLOCK},{FP8_BLOCK}] files; "
                f"vLLM looks up a {scheme.weight.granularity} layer's in files of its own shape"
            )
        return super().supports(scheme, problem, platform)

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        tile = "x".join(str(self.config[k]) for k in ("BLOCK_SIZE_M", *reversed(TILE_KEYS)))
        return f"{self.kernel.name}[tuned {tile}]"

    def launch_config(self) -> dict[str, int] | None:
        return self.config


TUNED_CONFIG_PATHS = PluginFamily(
    lambda: [VllmTritonBlockFp8TunedPath(config) for config in tuned_block_configs()]
)
