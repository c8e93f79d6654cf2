"""vLLM's Triton per-token-group FP8 quantizer (``fp8_utils.per_token_group_quant_fp8``)
as qharness quantizers, on a GPU or interpreted on a simulated one.

``per_token_group_quant_fp8`` is what `QuantFP8.forward_cuda` (and ``forward_hip`` with
aiter off, vLLM's default) calls for dynamic group quant, and what vLLM's block-FP8 linear
and MoE callers call directly. It runs the compiled op ``_C.per_token_group_fp8_quant``
on CUDA and ROCm when the input is contiguous, and its Triton kernels otherwise ("TRITON
FALLBACK": ``_per_token_group_quant_fp8``, or ``_per_token_group_quant_fp8_colmajor`` for
column-major scales). The quantizers hand vLLM the activation as a row-padded view (every
group contiguous, rows ``PAD`` elements apart), the layout for which vLLM itself takes the
Triton kernels on the GPU platform the run simulates (`simulated_device`: ``is_rocm`` on
gfx942/gfx950, ``is_cuda`` on sm_90); the values are the suite's, unchanged.

Everything the kernels read from the platform is vLLM's own lookup under the simulated
architecture (`simulated_platform`): the FP8 dtype ``current_platform.fp8_dtype()`` and
the bound ``get_fp8_min_max()`` (224 where ``is_fp8_fnuz()``, e4m3fn's 448 else). What
the kernels compute (the conventions declared):

- ``_absmax = max(max|y|, eps)`` with ``eps = 1e-10``, ``scale_raw = _absmax * (1.0 /
  fp8_max)``: the float32 reciprocal of the bound, on purpose ("Use multiply-by-reciprocal
  instead of division to match PyTorch's tensor/scalar division precision"):
  ``amax_floor_1e-10_times_reciprocal_max``;
- fp32 scales: ``y_s = scale_raw``; power-of-two (``use_ue8m0``) scales:
  ``exp2(ceil(log2(scale_raw)))``, where vLLM's compiled op bounds the scale at 1e-10
  first (``exp2f(ceilf(log2f(fmaxf(fabsf(y_s), 1e-10f))))``, csrc per_token_group_quant.cu)
  and vllm-project/vllm#53346 gives the Triton kernels the same floor:
  ``ue8m0_scale_floor_1e-10``. vLLM 0.32's Triton kernels lack it (a finding:
  integrations/vllm/findings/vllm_group_quant_ue8m0_fallback_floor.py);
- elements ``clamp(y / y_s, fp8_min, fp8_max)`` (the reference's division), then the FP8
  cast (``fnuz_clamp_224`` on e4m3fnuz).

Two quantizers, one per scale layout vLLM's callers ask for: row-major [M, K/128] scales
(the block-FP8 Triton linear's `QuantFP8`, fused MoE) and column-major ones
(``column_major_scales=True``: the CUTLASS, DeepGEMM and FlashInfer block-FP8 linears);
each runs fp32 and UE8M0 scales (``use_ue8m0``: DeepGEMM's E8M0 layouts), 1 x 128 groups
and 1 x 64 (group_size is the weight's block_k).

Under Triton's interpreter the kernels' float32 -> FP8 conversion is rounded to nearest
even (`harness.fp8_conversion_rounded_to_nearest_even`). Layout only: FP8 bytes viewed as
codes, scales read back as a contiguous [M, K / 128] grid.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import ClassVar

import torch

from harness import (
    E8M0,
    FP8_BLOCK,
    FP32,
    FindingCase,
    KnownFinding,
    QuantizedTensor,
    QuantSpec,
    Support,
    detect_platform,
    fp8_conversion_rounded_to_nearest_even,
)
from qharness_vllm import ENGINE
from qharness_vllm.triton_platform import (
    ARCHS,
    interpreting,
    simulated_arch,
    simulated_device,
    simulated_platform,
    triton_unavailable,
)

# group_size is the weight's block_k: 128 as checkpoints ship it, 64 in the non-square
# block designs (harness.linear.designs)
GROUP_TILES = frozenset({(1, FP8_BLOCK), (1, FP8_BLOCK // 2)})
PAD = 64  # elements between rows of the view handed to vLLM (module doc)
FP8_FORMATS = {torch.float8_e4m3fn: "e4m3fn", torch.float8_e4m3fnuz: "e4m3fnuz"}
# integrations/vllm/findings/FINDINGS.md (vllm_group_quant_ue8m0_fallback_floor.py)
_UE8M0_NO_FLOOR = (
    "vLLM 0.32's Triton per-token-group FP8 kernels with use_ue8m0 round amax * (1 / "
    "fp8_max) up to a power of two with no 1e-10 floor on the scale, where its compiled "
    "op (and the fix, vllm-project/vllm#53346) floors the scale at 1e-10 first: a group "
    "whose amax is below 448e-10 (all zero, tiny) gets 2^-42 instead of 2^-33, its codes "
    "differ by layout (integrations/vllm/findings/vllm_group_quant_ue8m0_fallback_floor.py)"
)


def _power_of_two_scales(case: FindingCase) -> bool:
    return case.scale_mode == "rceil"  # use_ue8m0: E8M0 rceil specs


def _platform_format() -> str | None:
    """The FP8 flavour vLLM's platform reports: on the simulated arch, or on this GPU."""
    arch = simulated_arch()
    if arch in ARCHS:
        return FP8_FORMATS[ARCHS[arch].fp8_dtype]
    from vllm.platforms import current_platform

    return FP8_FORMATS.get(current_platform.fp8_dtype())


class _VllmTritonGroupQuantizer:
    engine = ENGINE
    conventions: frozenset[str] = frozenset(
        {"amax_floor_1e-10_times_reciprocal_max", "ue8m0_scale_floor_1e-10", "fnuz_clamp_224"}
    )
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            _UE8M0_NO_FLOOR,
            suites=frozenset({"quantizers"}),
            when=_power_of_two_scales,
            behaves_as=frozenset({"ue8m0_no_scale_floor"}),
            replaces=frozenset({"ue8m0_scale_floor_1e-10"}),
        ),
    )
    name: ClassVar[str]
    column_major: ClassVar[bool]

    def supports(self, spec: QuantSpec) -> Support:
        why = triton_unavailable(detect_platform())
        if why:
            return Support.no(f"{self.name}: {why}")
        fmt = _platform_format()
        if spec.format != fmt:
            return Support.no(
                f"{self.name}: {fmt} (vLLM's fp8_dtype() here) only, not {spec.format}"
            )
        if spec.block not in GROUP_TILES or not spec.dynamic:
            return Support.no(
                f"{self.name}: dynamic 1x128 or 1x64 groups only, not {spec.granularity}"
            )
        bound = 224.0 if fmt == "e4m3fnuz" else None  # get_fp8_min_max(): 224 on fnuz
        if spec.clamp_max not in (None, bound):
            return Support.no(f"{self.name}: saturates at get_fp8_min_max(), not {spec.clamp_max}")
        fp32 = spec.scale_fmt is FP32 and spec.scale_rounding == "exact"
        ue8m0 = spec.scale_fmt is E8M0 and spec.scale_rounding == "rceil"
        if not (fp32 or ue8m0):
            return Support.no(
                f"{self.name}: fp32 scales, or power-of-two ones (use_ue8m0: E8M0 rceil), "
                f"not {spec.scale_format}/{spec.scale_rounding}"
            )
        return Support.yes()

    def supports_shape(self, spec: QuantSpec, shape: tuple[int, ...]) -> Support:
        if len(shape) != 2:
            return Support.no(f"{self.name}: 2-D input, got {shape}")
        if shape[0] == 1:  # a one-row view is contiguous whatever its row stride
            return Support.no(
                f"{self.name}: vLLM runs its compiled op, not the Triton kernels, on a "
                "one-row input (contiguous whatever its row stride); the CPU build lacks it"
            )
        group = spec.block[1] or shape[-1]
        if shape[-1] % group:
            return Support.no(f"{self.name}: K % {group} == 0 (vLLM asserts it), K = {shape[-1]}")
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        if scale is not None:
            raise ValueError(f"{self.name} computes its own scales (dynamic)")
        from vllm.model_executor.layers.quantization.utils.fp8_utils import (
            per_token_group_quant_fp8,
        )

        m, k = x.shape
        rows = torch.zeros(m, k + PAD, dtype=torch.float32, device=x.device)
        rows[:, :k] = x.float()
        view = rows[:, :k]  # groups contiguous, the tensor not: vLLM's Triton branch
        arch = simulated_arch()
        conversion = fp8_conversion_rounded_to_nearest_even() if interpreting() else nullcontext()
        with simulated_platform(arch), simulated_device(arch), conversion:
            q, s = per_token_group_quant_fp8(
                view,
                spec.block[1],
                column_major_scales=self.column_major,
                use_ue8m0=spec.scale_fmt is E8M0,
            )
        return QuantizedTensor(q.contiguous().view(torch.uint8), s.float().contiguous(), spec)


class VllmTritonGroupQuantFp8(_VllmTritonGroupQuantizer):
    """Row-major scales (``_per_token_group_quant_fp8``)."""

    name = "vllm_triton_per_token_group_quant_fp8"
    column_major = False


class VllmTritonGroupQuantFp8ColMajor(_VllmTritonGroupQuantizer):
    """Column-major scales (``_per_token_group_quant_fp8_colmajor``)."""

    name = "vllm_triton_per_token_group_quant_fp8_colmajor"
    column_major = True
