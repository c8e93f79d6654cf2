"""aiter's MXFP4 quantizer for its asm GEMMs (`aiter.utility.fp4_utils.dynamic_mxfp4_quant`
with ``shuffle=True``: the Triton kernel ``_dynamic_mxfp4_quant_kernel_asm_layout``) as a
qharness quantizer.

The kernel is a second copy of aiter's MXFP4 quantizing step: each 1x32 block's E8M0 scale
by Quark's "even" rule (amax's float32 bits + 0x200000, exponent kept, minus 2) and FP4
codes by integer arithmetic on float32 bits. With ``shuffle=True`` it writes the codes
row-major (packed, element 0 in the low nibble) and the E8M0 scales in the layout aiter's
asm kernels read, the one ``fp4_utils.e8m0_shuffle`` documents (rows padded to 256 and
scale columns to 8, 32x8 tiles permuted); this adapter undoes exactly that permutation,
computed by applying ``e8m0_shuffle`` itself to the positions, and keeps the valid
[rows, cdiv(K, 32)] corner. Findings (docs/ENGINE-FINDINGS.md): FP4 ties away from zero
(ROCm/aiter#2247, fixed by #2249 after the installed wheel), the row-group stride of its
shuffled scales (ROCm/aiter#2900), and ``scaling_mode`` ignored (the wrapper passes
``SCALING_MODE=0``).

Under Triton 3.9 the kernel indexes its scalar column id as ``pid_n[None, :]``, which 3.9
rejects; on a simulated platform the call runs under
`qharness_aiter.interpreter.none_then_slice_indexing` (the index Triton's own pending fix
keeps valid), counted.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from harness import (
    MX_BLOCK,
    FindingCase,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    detect_platform,
    e8m0_decode,
    unpack_fp4,
)
from qharness_aiter.loader import aiter_utility
from qharness_aiter.quantizer import QUARK_MODES, DynamicMXFP4Quantizer, even_tensor_case

SCALE_ROW_GROUP = 32  # e8m0_shuffle's row tile (two 16-row halves)
SCALE_COL_GROUP = 8  # e8m0_shuffle's scale-column tile


def misplaced_row_groups(case: FindingCase) -> bool:
    """Tensors whose shuffled scales the kernel places with the wrong row-group stride:
    more than one 32-row group, and cdiv(K, 32) scale columns not a multiple of 8 (the
    kernel strides groups by 32 * cdiv(K, 32), e8m0_shuffle by 32 * that padded to 8).
    Among them the MX edge-case and scale-point blocks (one 32-wide block per row, more
    than 32 rows): almost every scale there lands elsewhere, so those cases are covered
    whole and the other findings of `DynamicMXFP4Quantizer` at float32's edges cannot be
    told apart through this layout."""
    if len(case.shape) != 2:
        return False
    rows, k = case.shape
    return rows > SCALE_ROW_GROUP and -(-k // MX_BLOCK) % SCALE_COL_GROUP != 0


def unshuffle_scales(fp4_utils: object, shuffled: torch.Tensor) -> torch.Tensor:
    """Row-major E8M0 bytes from the layout ``fp4_utils.e8m0_shuffle`` writes: the shuffle
    applied to the positions 0..n-1 says where each row-major element went."""
    rows, cols = shuffled.shape
    positions = torch.arange(rows * cols, dtype=torch.int64).view(rows, cols)
    went_to = fp4_utils.e8m0_shuffle(positions).reshape(-1)  # type: ignore[attr-defined]
    flat = torch.empty(rows * cols, dtype=torch.uint8)
    flat[went_to] = shuffled.reshape(-1).cpu()
    return flat.view(rows, cols)


class FP4UtilsMXFP4Quantizer(DynamicMXFP4Quantizer):
    """`DynamicMXFP4Quantizer`'s contract (MXFP4, Quark's modes, K a multiple of 4), the
    asm-layout kernel and its scale layout."""

    name = "aiter_fp4_utils_dynamic_mxfp4_quant"
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "aiter fp4_utils.dynamic_mxfp4_quant ignores its scaling_mode argument (Quark's "
            "'floor' and 'ceil' give 'even' scales): the wrapper launches the kernel with "
            "SCALING_MODE=0 whatever it is given "
            "(integrations/aiter/findings/dynamic_mxfp4_quant_scaling_mode.py, the same "
            "wrapper pattern)",
            suites=frozenset({"quantizers"}),
            when=lambda case: case.scale_mode in QUARK_MODES - {"even"},
        ),
        KnownFinding(
            "aiter fp4_utils._dynamic_mxfp4_quant_kernel_asm_layout (shuffle=True) strides "
            "its shuffled scales' 32-row groups by 32 * cdiv(K, 32) where e8m0_shuffle's "
            "layout (which the asm GEMMs read) strides them by 32 * cdiv(K, 32) padded to 8: "
            "for more than 32 rows and K not a multiple of 256, scales of later row groups "
            "land in (and overwrite) the wrong places (ROCm/aiter#2900, after the installed "
            "wheel) (integrations/aiter/findings/aiter_fp4_utils_scale_row_groups.py)",
            suites=frozenset({"quantizers"}),
            when=misplaced_row_groups,
        ),
        KnownFinding(
            "aiter fp4_utils._dynamic_mxfp4_quant_kernel_asm_layout (fp4_utils."
            "dynamic_mxfp4_quant) rounds FP4 ties away from zero (0.25 -> 0.5, 1.25 -> 1.5, "
            "2.5 -> 3, 5 -> 6), not to nearest even: its own '+ 1 >> 1' rounding, an "
            "upstream bug (ROCm/aiter#2247, fixed by #2249; not in 0.1.7.post2.dev18) "
            "(integrations/aiter/findings/aiter_fp4_utils_ties_away.py)",
            suites=frozenset({"quantizers"}),
            when=even_tensor_case,
            behaves_as=frozenset({"fp4_ties_away"}),
        ),
    )

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError("aiter dynamic_mxfp4_quant computes its own scales (MX is dynamic)")
        platform = detect_platform()
        fp4_utils = aiter_utility(platform, "fp4_utils")
        from qharness_aiter.interpreter import assume_as_hint, none_then_slice_indexing

        with assume_as_hint(), none_then_slice_indexing():
            packed, shuffled = fp4_utils.dynamic_mxfp4_quant(
                x.float(), scaling_mode=spec.scale_rounding, shuffle=True
            )
        rows, k = x.shape
        codes = unpack_fp4(packed.view(torch.uint8).contiguous())[..., :k]
        blocks = -(-k // MX_BLOCK)
        scale_codes = unshuffle_scales(fp4_utils, shuffled.view(torch.uint8))
        return QuantizedTensor(
            codes, e8m0_decode(scale_codes[:rows, :blocks].contiguous().to(x.device)), spec
        )
