"""aiter's MXFP4 fused MoE Triton kernel (`aiter.ops.triton.moe_op_mxfp4.fused_moe_mxfp4`,
``tl.dot_scaled``) as a qharness MoE path, with aiter's token alignment.

The block runs as `qharness_aiter.moe` runs aiter's FP8 `fused_moe`: the routing is aligned
by `moe_align_block_size_triton`; the first grouped GEMM reads the input's token rows
(``top_k`` = k), the second the intermediate's pair rows (``top_k`` = 1); both write bf16;
SiLU-and-mul, the intermediate's quantization (the harness's reference quantizer) and the
routing-weighted combine are the harness's (``mul_routed_weight`` False).

Operands in aiter's layouts: weights [E, N, K/2] packed FP4 (element 0 in the low nibble)
with E8M0 scale bytes [E, N, K/32] (``B_mx_scale``, unswizzled); activations packed FP4
with E8M0 bytes (``A_mx_scale``), quantized by the harness's reference quantizer (the
scheme's E8M0 rule: the kernel takes codes and scales whatever rule made them). The
wrapper's other activation form, bf16/fp16/FP8 without block scales, matches no MX scheme:
``w_mxfp4_a_fp8`` has 1x32 scales (the wrapper asserts ``A_mx_scale`` is None for it), and
weight-only ``w_mxfp4`` would need the intermediate in bf16, which the harness's pipeline
keeps in float32. The kernel also multiplies by a per-tensor ``A_scale`` and a
per-expert ``B_scale`` (both asserted present): MX schemes have no such level, so both are
1.0 (the product is then exact).

Where: aiter ships MXFP4 MoE configs for MI350X (gfx950) only
(``configs/moe/MI350X-MOE-MX_FP4.json``) and gfx942 has no FP4 arithmetic (aiter's
``is_fp4_avail()``), so the gfx942 row runs none of the MX schemes (they count as skips with
that reason). Launch configs: aiter's tuned config (`get_optimal_moe_config` with
``use_mxfp4``: 64x64x128 blocks at the suite's sizes, so the one 32-element K block is a
masked tail), or, for ``aiter_fused_moe_mxfp4_small_blocks``, 16x16x32 blocks (BLOCK_K a
multiple of the MX block, as the kernel asserts): several N blocks and M blocks padding
each expert's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from harness import (
    MOE_SCHEMES,
    MX_BLOCK,
    Choice,
    DispatchTable,
    Kernel,
    OperandContract,
    PlatformInfo,
    QuantizedExperts,
    QuantizedTensor,
    Routing,
    Scheme,
    dispatch_problems,
    e8m0_encode,
    pack_fp4,
)
from qharness_aiter.loader import aiter_triton
from qharness_aiter.moe import AiterMoEPathBase, arch_table

_MX_TILE = frozenset({(1, MX_BLOCK)})


# The wrapper takes A either as MXFP4 (uint8 with A_mx_scale) or without block scales
# (bf16/fp16/fp8 and the per-tensor A_scale: "A_mx_scale should not exist when A is not
# mxfp4"), so 1x32-scaled FP8 activations (w_mxfp4_a_fp8) are not a pairing it takes.
A_MXFP4 = "fused_moe_mxfp4.a_mxfp4"
MODES: dict[str, Kernel] = {
    A_MXFP4: Kernel(
        A_MXFP4,
        OperandContract(frozenset({"e2m1"}), "e8m0", _MX_TILE, _MX_TILE),
        probe="triton.dot_scaled",
        probe_per_format=True,
    ),
}

# arch -> mode -> schemes (explicit names). The activation's E8M0 rule is the harness's
# quantizer's: the kernel takes codes and scales whatever rule made them.
MODE_SCHEMES: dict[str, dict[str, frozenset[str]]] = {
    "gfx942": {A_MXFP4: frozenset()},  # no FP4 arithmetic, no MXFP4 MoE configs
    "gfx950": {
        A_MXFP4: frozenset(
            {
                "w_mxfp4_a_mxfp4",
                "w_mxfp4_a_mxfp4@ceil",
                "w_mxfp4_a_mxfp4@even",
                "w_mxfp4_a_mxfp4@rceil",
            }
        ),
    },
}


def moe_mxfp4_table() -> DispatchTable:
    return arch_table(MODE_SCHEMES)


def moe_mxfp4_table_problems() -> list[str]:
    return dispatch_problems(MOE_SCHEMES, MODES, moe_mxfp4_table())


SMALL_BLOCKS: dict[str, Any] = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 16,
    "BLOCK_SIZE_K": 32,
    "GROUP_SIZE_M": 1,
}


class AiterFusedMoEMXFP4Path(AiterMoEPathBase):
    """aiter's `fused_moe_mxfp4` (both grouped GEMMs) under aiter's tuned config or small
    blocks."""

    name = "aiter_fused_moe_mxfp4"
    modes: ClassVar[Mapping[str, Kernel]] = MODES
    tuned_config: ClassVar[dict[str, bool]] = {"use_mxfp4": True}
    small_block_config: ClassVar[dict[str, Any]] = SMALL_BLOCKS

    def make_table(self) -> DispatchTable:
        return moe_mxfp4_table()

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        mode, _ = self.mode(scheme, platform)
        config = "16x16x32 blocks" if self.small_blocks else "aiter's tuned config"
        return (
            f"aiter.ops.triton.moe_op_mxfp4.fused_moe_mxfp4[{mode.name if mode else '?'}] "
            f"({config})"
        )

    def refusal(self, scheme: Scheme, platform: PlatformInfo, choice: Choice[Kernel]) -> str:
        gfx950_only = frozenset().union(*MODE_SCHEMES["gfx950"].values())
        if platform.arch == "gfx942" and scheme.name in gfx950_only:
            return (
                "aiter tunes fused_moe_mxfp4 for MI350X (gfx950) only "
                "(configs/moe/MI350X-MOE-MX_FP4.json) and gfx942 has no FP4 arithmetic "
                "(is_fp4_avail())"
            )
        return choice.reason

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

        config, aligned = prepared
        if q is None:
            raise ValueError(f"{self.name}: the kernel takes quantized activations here")
        mod = aiter_triton(platform, "moe_op_mxfp4")
        a = pack_fp4(q.codes.contiguous())  # [rows, K/2]
        a_mx = e8m0_encode(q.scale.float()).contiguous()  # [rows, K/32]
        b = pack_fp4(w.codes.contiguous())  # [E, N, K/2]
        b_mx = e8m0_encode(w.scale.float()).contiguous()  # [E, N, K/32]
        experts, n = b.shape[0], b.shape[1]
        pairs = routing.ids.numel()
        c = torch.zeros(pairs // top_k, top_k, n, dtype=torch.bfloat16, device=a.device)
        mod.fused_moe_mxfp4(
            a,
            b,
            c,
            torch.ones(1, dtype=torch.float32, device=a.device),  # A_scale: no such level
            torch.ones(experts, dtype=torch.float32, device=a.device),  # B_scale, likewise
            a_mx,
            b_mx,
            routing.weights.float().contiguous(),
            routing.ids.to(torch.int32).contiguous(),
            aligned.sorted_ids,
            aligned.expert_ids,
            aligned.num_post_padded,
            False,  # mul_routed_weight: the harness combines
            top_k,
            False,  # swizzle_mx_a
            False,  # swizzle_mx_b
            config,
            tl.bfloat16,
        )
        return c.reshape(pairs, n).float()


class AiterFusedMoEMXFP4SmallBlocks(AiterFusedMoEMXFP4Path):
    name = "aiter_fused_moe_mxfp4_small_blocks"
    small_blocks = True
