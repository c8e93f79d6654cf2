"""The native path: the platform's real FP8 GEMM, ``torch._scaled_mm``.

Which schemes go to which kernel is an explicit table (scheme name -> scaling mode),
checked against the capability probe at run time. Scales are normalized to the shapes the
kernel's contract wants (0-D tensor-wise; (M,1)/(1,N) row-wise) or rejected with a
`ScaleShapeError`: 1-D scales passed straight through were a real bug.
"""

from __future__ import annotations

import torch

from harness import capabilities
from harness.formats import get_format
from harness.paths.base import LinearProblem, Support
from harness.platform import PlatformInfo
from harness.quantize import QuantizedLinear, quantize_activation
from harness.schemes import Scheme

# scheme name -> torch._scaled_mm scaling mode. Adding a scheme here is a deliberate act.
SCALED_MM_SCHEMES: dict[str, str] = {
    "fp8_per_tensor": "tensorwise",
}

# torch._scaled_mm on CUDA/ROCm requires K and N to be multiples of 16.
_CUDA_ALIGNMENT = 16


class ScaleShapeError(ValueError):
    """A scale tensor whose shape does not fit the kernel's contract."""


def _as_rowwise(scale: torch.Tensor, length: int, role: str) -> torch.Tensor:
    """Accept 0-D, (1,), (L,), (L,1), (1,L) and return a contiguous float32 column (L, 1)."""
    s = scale.float()
    if s.numel() == 1:
        return s.reshape(1, 1).expand(length, 1).contiguous()
    if s.numel() == length and (s.dim() == 1 or (s.dim() == 2 and 1 in s.shape)):
        return s.reshape(length, 1).contiguous()
    raise ScaleShapeError(
        f"{role} scale of shape {tuple(scale.shape)} fits neither tensor-wise (one element) "
        f"nor row-wise ({length} elements as ({length},), ({length},1) or (1,{length}))"
    )


def scaled_mm_scales(
    scale_a: torch.Tensor, scale_b: torch.Tensor, m: int, n: int
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Normalize scales to torch._scaled_mm's contract: 0-D pair, or (M,1) and (1,N)."""
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        return scale_a.float().reshape(()), scale_b.float().reshape(()), "tensorwise"
    a = _as_rowwise(scale_a, m, "activation")
    b = _as_rowwise(scale_b, n, "weight").reshape(1, n).contiguous()
    return a, b, "rowwise"


class NativeScaledMMPath:
    """FP8 GEMM through torch._scaled_mm, bias fused into the kernel call."""

    name = "native"

    @property
    def uses_capabilities(self) -> frozenset[str]:
        """Every probed capability this path can dispatch to (checked by the platform suite)."""
        used = {"scaled_mm.fp32_out_bias"}
        for scheme_name, mode in SCALED_MM_SCHEMES.items():
            from harness.schemes import get_scheme

            used.add(f"scaled_mm.{mode}.{get_scheme(scheme_name).weight.format}")
        return frozenset(used)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        mode = SCALED_MM_SCHEMES.get(scheme.name)
        if mode is None:
            return Support.no(f"emulated-only: no torch._scaled_mm kernel for {scheme.name}")
        act = scheme.activation
        if act is None or act.format != scheme.weight.format:
            return Support.no(f"{scheme.name}: torch._scaled_mm needs FP8 on both operands")
        cap = f"scaled_mm.{mode}.{scheme.weight.format}"
        if not capabilities.has(platform, cap):
            return Support.no(capabilities.why_not(platform, cap))
        if platform.is_cuda_alike and (problem.k % _CUDA_ALIGNMENT or problem.n % _CUDA_ALIGNMENT):
            return Support.no(
                f"torch._scaled_mm on {platform.device} needs K and N multiples of "
                f"{_CUDA_ALIGNMENT}, got K={problem.k} N={problem.n}"
            )
        fp32_bias = problem.bias and problem.out_dtype == torch.float32
        if fp32_bias and not capabilities.has(platform, "scaled_mm.fp32_out_bias"):
            return Support.no(capabilities.why_not(platform, "scaled_mm.fp32_out_bias"))
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        if xq is None:
            raise ValueError(f"{layer.scheme.name}: native FP8 GEMM needs quantized activations")
        dtype = get_format(layer.scheme.weight.format).to_torch_dtype()
        a = xq.codes.view(dtype)
        b = layer.weight.codes.view(dtype).t()  # [N,K] row-major is the [K,N] column-major B
        m, n = a.shape[0], b.shape[1]
        scale_a, scale_b, _ = scaled_mm_scales(xq.scale, layer.weight.scale, m, n)
        bias = None if layer.bias is None else layer.bias.to(out_dtype)
        return torch._scaled_mm(
            a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype
        )
