"""The native path: the platform's real scaled GEMMs.

Which schemes go to which kernel is an explicit table (scheme name -> kernel mode), checked
against the capability probe at run time:

- ``tensorwise`` / ``rowwise``: ``torch._scaled_mm`` with FP8 operands. Scales are
  normalized to the shapes its contract wants (0-D tensor-wise; (M,1)/(1,N) row-wise; a
  per-tensor activation scale next to per-channel weight scales is expanded to (M,1)) or
  rejected with a `ScaleShapeError`: 1-D scales passed straight through were a real bug.
- ``blockwise`` (FP8 1x128 activations x 128x128 weights) and ``mx`` (OCP MX, 1x32 E8M0):
  ``torch.nn.functional.scaled_mm``, see `harness.ops.block_scaled`; probed with bfloat16
  output, and the bias is added in a float32 epilogue after the kernel (a second rounding,
  which the suite's bound allows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.formats import e8m0_encode, get_format
from harness.core.quantize import QuantizedLinear, QuantizedTensor, quantize_activation
from harness.core.schemes import Scheme
from harness.errors import QHarnessError
from harness.ops.block_scaled import (
    FP8_BLOCK,
    MX_BLOCK,
    MX_OPERANDS,
    blockwise_scaled_mm,
    mx_scaled_mm,
)
from harness.paths.base import LinearProblem, Support
from harness.platform import capabilities
from harness.platform.info import PlatformInfo

# scheme name -> kernel mode (a key of KERNELS). Adding a scheme here is a deliberate act.
SCALED_MM_SCHEMES: dict[str, str] = {
    "fp8_per_tensor": "tensorwise",
    "fp8_per_tensor_fnuz": "tensorwise",
    "fp8_per_tensor_fnuz_clamp224": "tensorwise",
    "fp8_per_channel": "rowwise",
    "fp8_per_channel_fnuz": "rowwise",
    "fp8_per_channel_fnuz_clamp224": "rowwise",
    "fp8_w_per_channel_a_static": "rowwise",  # per-tensor A scale expanded to (M, 1)
    "fp8_w_per_channel_a_static_fnuz": "rowwise",
    "fp8_per_block": "blockwise",
    "fp8_per_block_fnuz": "blockwise",
    "w_mxfp8_a_mxfp8": "mx",
    "w_mxfp8_a_mxfp8@rceil": "mx",
    "w_mxfp4_a_mxfp4": "mx",
    "w_mxfp4_a_mxfp4@rceil": "mx",
    "w_mxfp4_a_mxfp4@even": "mx",
    "w_mxfp4_a_mxfp4@ceil": "mx",
}

# torch._scaled_mm / F.scaled_mm on CUDA/ROCm require K and N to be multiples of 16.
_CUDA_ALIGNMENT = 16


class ScaleShapeError(QHarnessError, ValueError):
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


# ------------------------------------------------------------------------ kernel modes
Forward = Callable[
    [QuantizedTensor, QuantizedTensor, torch.Tensor | None, torch.dtype], torch.Tensor
]


@dataclass(frozen=True)
class KernelMode:
    """One native kernel family: its contract's shape limits and how to call it."""

    forward: Forward  # (activation, weight, bias, out_dtype) -> y
    k_multiple: int = 1  # K and N must be multiples of these (on top of GPU alignment)
    n_multiple: int = 1
    out_dtypes: tuple[torch.dtype, ...] | None = None  # None: any; else what was probed
    fused_bias: bool = False  # the kernel adds the bias itself (fp32 output needs a probe)


def _scaled_mm_forward(
    xq: QuantizedTensor, w: QuantizedTensor, bias: torch.Tensor | None, out_dtype: torch.dtype
) -> torch.Tensor:
    dtype = get_format(w.spec.format).to_torch_dtype()
    a = xq.codes.view(dtype)
    b = w.codes.view(dtype).t()  # [N,K] row-major is the [K,N] column-major B
    scale_a, scale_b, _ = scaled_mm_scales(xq.scale, w.scale, a.shape[0], b.shape[1])
    kernel_bias = None if bias is None else bias.to(out_dtype)
    return torch._scaled_mm(
        a, b, scale_a=scale_a, scale_b=scale_b, bias=kernel_bias, out_dtype=out_dtype
    )


def _epilogue(y: torch.Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    return y if bias is None else (y.float() + bias.float()).to(out_dtype)


def _blockwise_forward(
    xq: QuantizedTensor, w: QuantizedTensor, bias: torch.Tensor | None, out_dtype: torch.dtype
) -> torch.Tensor:
    y = blockwise_scaled_mm(xq.codes, xq.scale, w.codes, w.scale, w.spec.format, out_dtype)
    return _epilogue(y, bias, out_dtype)


def _mx_forward(
    xq: QuantizedTensor, w: QuantizedTensor, bias: torch.Tensor | None, out_dtype: torch.dtype
) -> torch.Tensor:
    y = mx_scaled_mm(
        xq.codes, e8m0_encode(xq.scale), w.codes, e8m0_encode(w.scale), w.spec.format, out_dtype
    )
    return _epilogue(y, bias, out_dtype)


_PROBED_OUT = (torch.bfloat16,)
KERNELS: dict[str, KernelMode] = {
    "tensorwise": KernelMode(_scaled_mm_forward, fused_bias=True),
    "rowwise": KernelMode(_scaled_mm_forward, fused_bias=True),
    "blockwise": KernelMode(_blockwise_forward, FP8_BLOCK, FP8_BLOCK, _PROBED_OUT),
    "mx": KernelMode(_mx_forward, MX_BLOCK, 1, _PROBED_OUT),
}


def _why_unmapped(scheme: Scheme) -> str:
    """Why a scheme has no native kernel, from what the scheme is (for the support matrix)."""
    act = scheme.activation
    if act is None:
        detail = "activations stay unquantized; scaled-mm kernels take two quantized operands"
    elif act.format != scheme.weight.format:
        detail = f"mixed element formats ({scheme.weight.format} x {act.format})"
    elif get_format(act.format).torch_dtype is None and act.format not in MX_OPERANDS:
        detail = f"torch has no {act.format} operand type"
    else:
        detail = "not in SCALED_MM_SCHEMES"
    return f"emulated-only: no native kernel for {scheme.name} ({detail})"


def _capability(mode_name: str, scheme: Scheme) -> str:
    """The probe that gates ``scheme`` on the kernel ``mode_name``."""
    return f"scaled_mm.{mode_name}.{scheme.weight.format}"


class NativeScaledMMPath:
    """The platform's scaled GEMM kernels, as the SCALED_MM_SCHEMES table assigns them."""

    name = "native"
    is_reference = False

    def output_roundings(self, scheme: Scheme, problem: LinearProblem) -> int:
        """Two roundings when the bias is added after the kernel's rounded output, else one."""
        mode = SCALED_MM_SCHEMES.get(scheme.name)
        fused = mode is not None and KERNELS[mode].fused_bias
        return 1 if fused or not problem.bias else 2

    @property
    def uses_capabilities(self) -> frozenset[str]:
        """Every probed capability this path can dispatch to (checked by the platform suite)."""
        from harness.core.schemes import get_scheme

        used = {_capability(mode, get_scheme(name)) for name, mode in SCALED_MM_SCHEMES.items()}
        return frozenset(used | {"scaled_mm.fp32_out_bias"})

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        mode_name = SCALED_MM_SCHEMES.get(scheme.name)
        if mode_name is None:
            return Support.no(_why_unmapped(scheme))
        mode = KERNELS[mode_name]
        act = scheme.activation
        if act is None or act.format != scheme.weight.format:
            return Support.no(f"{scheme.name}: native kernels need one element format for W and A")
        cap = _capability(mode_name, scheme)
        if not capabilities.has(platform, cap):
            return Support.no(capabilities.why_not(platform, cap))
        if platform.is_cuda_alike and (problem.k % _CUDA_ALIGNMENT or problem.n % _CUDA_ALIGNMENT):
            return Support.no(
                f"scaled mm on {platform.device} needs K and N multiples of "
                f"{_CUDA_ALIGNMENT}, got K={problem.k} N={problem.n}"
            )
        if problem.k % mode.k_multiple or problem.n % mode.n_multiple:
            return Support.no(
                f"{mode_name} kernel needs K a multiple of {mode.k_multiple} and N of "
                f"{mode.n_multiple}, got K={problem.k} N={problem.n}"
            )
        if mode.out_dtypes is not None and problem.out_dtype not in mode.out_dtypes:
            return Support.no(
                f"{mode_name} kernel is probed with {', '.join(map(str, mode.out_dtypes))} "
                f"output only, not {problem.out_dtype}"
            )
        fp32_bias = mode.fused_bias and problem.bias and problem.out_dtype == torch.float32
        if fp32_bias and not capabilities.has(platform, "scaled_mm.fp32_out_bias"):
            return Support.no(capabilities.why_not(platform, "scaled_mm.fp32_out_bias"))
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        mode_name = SCALED_MM_SCHEMES.get(layer.scheme.name)
        if mode_name is None:
            raise ValueError(_why_unmapped(layer.scheme))
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        if xq is None:
            raise ValueError(f"{layer.scheme.name}: native scaled mm needs quantized activations")
        return KERNELS[mode_name].forward(xq, layer.weight, layer.bias, out_dtype)
