"""aiter's fused MoE Triton kernel (`aiter.ops.triton.moe_op.fused_moe`, vLLM's kernel as
aiter ships it) with aiter's token alignment (`moe_align_block_size_triton`) as a qharness
MoE path, FP8 w8a8 per-tensor and 128x128 blocks.

The block runs as an aiter model runs it: the routing's expert ids are aligned by
`moe_align_block_size_triton` into expert-sorted, block-padded pair ids; the first grouped
GEMM reads the input's token rows (``top_k`` = k: pair // k), the second the intermediate's
pair rows (``top_k`` = 1). Both write bf16 (``compute_type``). Between them the harness's
pipeline runs: SiLU-and-mul in float32 on the kernel's bf16 gate/up, the intermediate
quantized by the reference quantizer. The routing weights are applied by the harness's
combine (``mul_routed_weight`` False), so each GEMM's own output is checked.

Activations reach the kernel quantized by the harness (as the native paths do): 1x128
block scales as ``A_scale``; for per-tensor FP8 the wrapper always quantizes A itself
(``_MOE_A_QUANT_FUNC``, an FP8 conversion the interpreter does not do as hardware does),
so the path installs the harness's codes and scale through aiter's own hook
(`moe_set_quant_func`) for the duration of the call and restores the previous one.

Launch configs: aiter's tuned config for the arch's device and the token count
(`get_optimal_moe_config`: BLOCK 64x64x128 at these sizes, so K = 32 is a masked tail and
w2's N = 32 a partial N block), or, for ``aiter_fused_moe_small_blocks``, 16x16x16 blocks:
several K steps, several N blocks, and M blocks that pad each expert's rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from harness import (
    FP8_BLOCK,
    MOE_SCHEMES,
    WHOLE,
    DispatchRow,
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
    dispatch_problems,
    rest_emulated,
)
from qharness_aiter import ENGINE
from qharness_aiter.interpreter import assume_as_hint
from qharness_aiter.loader import AITER_ARCHS, aiter_triton, platform_support

_FP8 = frozenset({"e4m3fn", "e4m3fnuz"})


@dataclass(frozen=True, kw_only=True)
class FusedMoEMode(Kernel):
    """One way `fused_moe` scales FP8 operands: per tensor, or per block (``block_shape``);
    gated by the probe of ``tl.dot`` for the element format."""

    block_shape: list[int] | None  # [block_n, block_k] of the weight scales
    probe: str = "triton.dot"
    probe_per_format: bool = True


PER_TENSOR = "fused_moe.per_tensor"
PER_BLOCK = "fused_moe.block_128x128"
MODES: dict[str, FusedMoEMode] = {
    m.name: m
    for m in (
        # one scale per expert weight (B_scale [E]) and one per activation (A_scale [1])
        FusedMoEMode(
            PER_TENSOR,
            OperandContract(_FP8, "fp32", frozenset({(WHOLE, WHOLE)}), frozenset({(WHOLE, WHOLE)})),
            block_shape=None,
        ),
        # B_scale [E, N/128, K/128]; A_scale [tokens, K/128]
        FusedMoEMode(
            PER_BLOCK,
            OperandContract(
                _FP8, "fp32", frozenset({(FP8_BLOCK, FP8_BLOCK)}), frozenset({(1, FP8_BLOCK)})
            ),
            block_shape=[FP8_BLOCK, FP8_BLOCK],
        ),
    )
}

# arch -> mode -> schemes (explicit names; per-channel weight scales are not among the
# kernel's FP8 modes: it loads one B scale per expert or per 128x128 block).
MODE_SCHEMES: dict[str, dict[str, frozenset[str]]] = {
    "gfx942": {
        PER_TENSOR: frozenset({"fp8_per_tensor_fnuz", "fp8_per_tensor_fnuz_clamp224"}),
        PER_BLOCK: frozenset({"fp8_per_block_fnuz"}),
    },
    "gfx950": {
        PER_TENSOR: frozenset({"fp8_per_tensor"}),
        PER_BLOCK: frozenset({"fp8_per_block"}),
    },
}


def arch_table(mode_schemes: Mapping[str, Mapping[str, frozenset[str]]]) -> DispatchTable:
    """For each aiter arch, real and simulated: its modes' schemes, every other MoE scheme
    emulated (one table shape for every aiter MoE kernel)."""
    table: dict[str, DispatchRow] = {}
    for arch in sorted(AITER_ARCHS):
        row = rest_emulated(mode_schemes[arch], MOE_SCHEMES)
        table[arch] = row
        table[f"triton-interpret-{arch}"] = row
    return table


def moe_table() -> DispatchTable:
    return arch_table(MODE_SCHEMES)


def moe_table_problems() -> list[str]:
    return dispatch_problems(MOE_SCHEMES, MODES, moe_table())


SMALL_BLOCKS: dict[str, Any] = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 16,
    "BLOCK_SIZE_K": 16,
    "GROUP_SIZE_M": 1,
}


def _fp8(t: torch.Tensor, fmt: str) -> torch.Tensor:
    return t.view(torch.float8_e4m3fnuz if fmt == "e4m3fnuz" else torch.float8_e4m3fn)


@dataclass
class Aligned:
    """`moe_align_block_size_triton`'s output: pair ids sorted by expert, block-padded."""

    sorted_ids: torch.Tensor
    expert_ids: torch.Tensor
    num_post_padded: torch.Tensor


def align(platform: PlatformInfo, ids: torch.Tensor, experts: int, block_m: int) -> Aligned:
    """Allocate as vLLM/aiter callers do (padding ids = numel, past every valid pair)."""
    mod = aiter_triton(platform, "moe_align_block_size")
    numel = ids.numel()
    max_padded = numel + experts * (block_m - 1)
    sorted_ids = torch.full((max_padded,), numel, dtype=torch.int32, device=ids.device)
    expert_ids = torch.empty(-(-max_padded // block_m), dtype=torch.int32, device=ids.device)
    num_post = torch.empty(1, dtype=torch.int32, device=ids.device)
    mod.moe_align_block_size_triton(
        ids.to(torch.int32).contiguous(), experts, block_m, sorted_ids, expert_ids, num_post
    )
    return Aligned(sorted_ids, expert_ids, num_post)


class AiterMoEPathBase(FusedMoEPathBase):
    """What every aiter fused-MoE path adds to the harness's: where aiter's MoE configs
    run, the interpreter's hints (counted), its tuned or small-block config with aiter's
    token alignment, and the numerics of a Triton grouped GEMM that rounds once to bf16
    (toward zero under the interpreter's truncating float32 -> bf16)."""

    name = "aiter_moe"
    engine = ENGINE
    runs_kernel_source = True  # Triton source: interpreted on a simulated arch
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()
    tuned_config: ClassVar[dict[str, bool]] = {}  # get_optimal_moe_config's kernel flag
    small_block_config: ClassVar[dict[str, Any]] = SMALL_BLOCKS

    def __init__(self) -> None:
        super().__init__()
        self.false_assumptions = 0

    def where(self, platform: PlatformInfo) -> Support:
        return platform_support(self.name, platform, "MoE configs")

    @contextlib.contextmanager
    def launch(self, platform: PlatformInfo) -> Iterator[None]:
        """On a simulated arch, ``tl.assume`` is taken as a hint and each false one counted."""
        if not platform.simulated:
            yield
            return
        with assume_as_hint() as seen:
            yield
        self.false_assumptions += seen.count

    def prepare(
        self, layer: MoELayer, routing: Routing, mode: Kernel, platform: PlatformInfo
    ) -> Any:
        tokens = routing.ids.shape[0]
        if self.small_blocks:
            config = dict(self.small_block_config)
        else:
            utils = aiter_triton(platform, "utils.moe_config_utils")
            config = dict(
                utils.get_optimal_moe_config(torch.bfloat16, M=tokens, **self.tuned_config)
            )
        aligned = align(platform, routing.ids, layer.num_experts, config["BLOCK_SIZE_M"])
        return config, aligned

    def numerics(self, scheme: Scheme, platform: PlatformInfo) -> Numerics:
        """Exact operands (FP8, or MX blocks scaled by powers of two in ``dot_scaled``),
        float32 accumulation; the two float32 scales multiplied after the sum (per tensor;
        1.0 for MX) or into each K block's partial sum (blocks; one block along K at the
        suite's H = I = 32); one rounding to bf16. Under Triton's interpreter float32 ->
        bf16 truncates (docs/ENGINES-ADAPTERS.md, the interpreter's numerics): declared as
        a rounding toward zero, so it is never reported as the kernel's and the per-GEMM
        intervals stay bit-exact."""
        interpreted = platform.simulated == "triton-interpret"
        return Numerics(
            out_dtype=torch.bfloat16,
            epilogue_roundings=2,
            rounding_mode="toward_zero" if interpreted else "nearest",
        )


class AiterFusedMoEPath(AiterMoEPathBase):
    """aiter's `fused_moe` (both grouped GEMMs) under aiter's tuned config or small blocks."""

    name = "aiter_fused_moe"
    modes: ClassVar[Mapping[str, Kernel]] = MODES
    tuned_config: ClassVar[dict[str, bool]] = {"use_fp8_w8a8": True}

    def make_table(self) -> DispatchTable:
        return moe_table()

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        mode, _ = self.mode(scheme, platform)
        config = "16x16x16 blocks" if self.small_blocks else "aiter's tuned config"
        return f"aiter.ops.triton.moe_op.fused_moe[{mode.name if mode else '?'}] ({config})"

    def gemm(
        self,
        prepared: Any,
        mode: Kernel,
        q: QuantizedTensor | None,
        w: QuantizedExperts,
        routing: Routing,
        top_k: int,
        platform: PlatformInfo,
    ) -> torch.Tensor:
        import triton.language as tl

        assert isinstance(mode, FusedMoEMode)
        config, aligned = prepared
        if q is None:
            raise ValueError(f"{self.name}: the kernel takes quantized activations")
        mod = aiter_triton(platform, "moe_op")
        fmt = w.spec.format
        a = _fp8(q.codes.contiguous(), fmt)
        b = _fp8(w.codes.contiguous(), fmt)  # [E, N, K]
        pairs, n = routing.ids.numel(), b.shape[1]
        c = torch.zeros(pairs // top_k, top_k, n, dtype=torch.bfloat16, device=a.device)
        if mode.block_shape is None:
            a_scale = q.scale.float().reshape(1).contiguous()
            b_scale = w.scale.float().reshape(-1).contiguous()  # [E]
        else:
            a_scale = q.scale.float().contiguous()  # [rows, K/128]
            b_scale = w.scale.float().contiguous()  # [E, N/128, K/128]
        previous = mod._MOE_A_QUANT_FUNC
        # per tensor: the wrapper "quantizes" A through this hook; it hands back our codes
        mod.moe_set_quant_func(lambda _out, codes, _scale: (codes, a_scale))
        try:
            mod.fused_moe(
                a,
                b,
                c,
                a_scale if mode.block_shape is not None else None,
                b_scale,
                None,
                routing.weights.float().contiguous(),
                routing.ids.to(torch.int32).contiguous(),
                aligned.sorted_ids,
                aligned.expert_ids,
                aligned.num_post_padded,
                False,  # mul_routed_weight: the harness combines
                top_k,
                tl.bfloat16,
                True,  # use_fp8_w8a8
                False,
                False,
                block_shape=mode.block_shape,
                config=config,
            )
        finally:
            mod.moe_set_quant_func(previous)
        return c.reshape(pairs, n).float()


class AiterFusedMoESmallBlocks(AiterFusedMoEPath):
    name = "aiter_fused_moe_small_blocks"
    small_blocks = True
