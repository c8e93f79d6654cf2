"""aiter's MXFP4 quantizer (`aiter.ops.triton.quant.dynamic_mxfp4_quant`) as a qharness quantizer.

The Triton kernel computes each 1x32 block's E8M0 scale from amax by Quark's "even" rule
(amax's float32 bits + 0x200000, exponent kept, minus 2: the harness's ``even`` mode) and the
FP4 codes by integer arithmetic on float32 bits, rounding ties away from zero ("rounding
nearest with tie breaking up", its own comment). That was once declared a convention; aiter's
tracker calls it a bug (ROCm/aiter#974, fixed on main by #975), so it is a finding: the
suites hold the kernel to round-to-nearest-even and the `even` cases that hold a tie xfail
with its text (docs/CONVENTIONS.md). This adapter converts the layout only: packed bytes
(element 0 in the low nibble) unpacked to one code per byte, E8M0 codes decoded to float32
powers of two. It runs on a ROCm GPU or a
simulated one (Triton's interpreter).

``scaling_mode`` names Quark's scale rules (``even``, ``floor``, ``ceil``); the wrapper
accepts it but never passes it to the kernel, so every mode gets "even" scales: a finding,
declared for the ``floor`` and ``ceil`` cases only; and NaN, Inf and float32-max blocks
get other scales than OCP MX's, declared for the MX edge-case blocks only (the golden
tensors hold none) (docs/ENGINE-FINDINGS.md).
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
    Support,
    detect_platform,
    e8m0_decode,
    unpack_fp4,
)
from qharness_aiter import ENGINE
from qharness_aiter.loader import AITER_ARCHS, aiter_triton

# aiter's FP4 tie rule: a finding (upstream bug), shared with fused_quant's MXFP4 quantizer.
TIES_AWAY = (
    "aiter 0.1.7 _mxfp4_quant_op (dynamic_mxfp4_quant, fused_flatten_mxfp4_quant) rounds FP4 "
    "ties away from zero (0.25 -> 0.5, 1.25 -> 1.5, 2.5 -> 3, 5 -> 6), not to nearest even: "
    "an upstream-acknowledged bug (ROCm/aiter#974, fixed on main by #975; not in "
    "0.1.7.post2.dev18) (integrations/aiter/findings/dynamic_mxfp4_quant_ties.py)"
)


def even_tensor_case(case: FindingCase) -> bool:
    """A golden tensor (named by its role) or a designed one, under the even rule: the
    cases whose values land on FP4 ties (the MX edge and scale-point blocks have findings
    of their own, listed first)."""
    return case.scale_mode == "even" and case.case in ("weight", "activation", "designed")


# The scale rules `scaling_mode` refers to (Quark's `scale_calculation_mode`, which the
# wrapper's docstring cites), by their harness E8M0 mode names (the same rules).
QUARK_MODES: frozenset[str] = frozenset({"even", "floor", "ceil"})


class DynamicMXFP4Quantizer:
    name = "aiter_dynamic_mxfp4_quant"
    engine = ENGINE
    conventions: frozenset[str] = frozenset()
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "aiter dynamic_mxfp4_quant ignores its scaling_mode argument (Quark's 'floor' "
            "and 'ceil' give 'even' scales): the wrapper never passes it to the kernel "
            "(integrations/aiter/findings/dynamic_mxfp4_quant_scaling_mode.py)",
            suites=frozenset({"quantizers"}),
            when=lambda case: case.scale_mode in QUARK_MODES - {"even"},
        ),
        KnownFinding(
            "aiter dynamic_mxfp4_quant at float32's edges: NaN elements are left out of the "
            "block amax (finite scale, NaN coded +-6), an Inf amax gives scale 2^127 (0xFE) "
            "instead of the NaN scale, and amax >= 1.75 * 2^127 gives 2^127 instead of the "
            "even rule's 2^126 (integrations/aiter/findings/dynamic_mxfp4_quant_nonfinite.py)",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"edge_cases"}),  # the blocks with NaN, Inf, float32 max
        ),
        KnownFinding(
            "aiter dynamic_mxfp4_quant at the E8M0 range's ends (the scale-point blocks, "
            "measured under Triton's interpreter): at_carry@127 and above_carry@127 get "
            "scale 2^127 where the even rule gives 2^126 (the top-binade carry above); "
            "below_carry@-126 (amax one float32 step below 1.75 * 2^-126, scale 2^-127 on "
            "both sides) codes 3.4999998 * scale as 4.0 where rounding gives 3.0: not yet "
            "isolated whether aiter's kernel or the interpreter's conversion does this, so "
            "no bug is claimed for it (docs/ENGINE-FINDINGS.md)",
            suites=frozenset({"quantizers"}),
            cases=frozenset({"mx_scale_points"}),
            when=lambda case: case.scale_mode == "even",
        ),
        KnownFinding(
            TIES_AWAY,
            suites=frozenset({"quantizers"}),
            when=even_tensor_case,
            behaves_as=frozenset({"fp4_ties_away"}),
        ),
    )

    def supports(self, spec: QuantSpec) -> Support:
        platform = detect_platform()
        if platform.simulated != "triton-interpret" and platform.device != "rocm":
            return Support.no(
                f"{self.name}: aiter's Triton kernel needs a ROCm GPU or a simulated one "
                "(harness run --simulate triton-interpret:gfx942|gfx950)"
            )
        if platform.arch not in AITER_ARCHS:
            return Support.no(f"{self.name}: aiter runs on {', '.join(sorted(AITER_ARCHS))}")
        if spec.format != "e2m1" or spec.scale_format != "e8m0" or spec.block != (1, MX_BLOCK):
            return Support.no(f"{self.name}: MXFP4 (e2m1, 1x32 E8M0 scales) only")
        if spec.scale_rounding not in QUARK_MODES:
            return Support.no(
                f"{self.name}: scaling_mode names Quark's rules {sorted(QUARK_MODES)}, "
                f"not {spec.scale_rounding}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2 or shape[-1] % 4:
            return Support.no(
                f"{self.name}: 2-D input with K a multiple of 4 (the wrapper asserts "
                f"(K // 2) % 2 == 0), got {shape}"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError("aiter dynamic_mxfp4_quant computes its own scales (MX is dynamic)")
        quant = aiter_triton(detect_platform(), "quant")
        from qharness_aiter.interpreter import assume_as_hint

        with assume_as_hint():
            packed, scale_codes = quant.dynamic_mxfp4_quant(
                x.float(), scaling_mode=spec.scale_rounding
            )
        k = x.shape[-1]
        codes = unpack_fp4(packed.contiguous())[..., :k]
        blocks = -(-k // MX_BLOCK)
        return QuantizedTensor(codes, e8m0_decode(scale_codes[:, :blocks].contiguous()), spec)
