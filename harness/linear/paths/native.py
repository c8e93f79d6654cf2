"""The native path: the platform's real scaled GEMMs.

Which schemes go to which kernel mode is an explicit dispatch table
(`LINEAR_NATIVE_DISPATCH`, the table type MoE uses too, harness.paths.dispatch): one row for
every platform, since the capability probe decides at run time whether a mode runs here.
Each mode is a `KernelContract`: it states which operands it takes (`accepts`, from
QuantSpec fields), and the table is checked against those statements (`dispatch_problems`)
by the self-tests and ``python -m harness platform``. The modes:

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
from harness.core.scale_formats import E8M0, FP32
from harness.core.schemes import SCHEMES, Scheme
from harness.core.spec import FP8_BLOCK, MX_BLOCK, WHOLE
from harness.errors import QHarnessError
from harness.ops.block_scaled import MX_OPERANDS, blockwise_scaled_mm, mx_scaled_mm
from harness.paths.base import (
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    Support,
)
from harness.paths.dispatch import (
    ANY_PLATFORM,
    EMULATE,
    DispatchTable,
    choose,
    dispatch_problems,
    native_decisions,
)
from harness.paths.kernel import Kernel
from harness.paths.operands import QuantizedOperands
from harness.platform import capabilities
from harness.platform.info import PlatformInfo, native_dispatch_key
from harness.platform.simulate import TORCH_KERNELS_AS_ARCH, not_the_simulated_arch

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


@dataclass(frozen=True, kw_only=True)
class KernelMode(Kernel):
    """One native kernel family: its contract (a `Kernel`: operands from the scheme's
    QuantSpec fields, gated by the probe ``scaled_mm.<mode>.<format>``), its shape limits
    and how to call it."""

    forward: Forward  # (activation, weight, bias, out_dtype) -> y
    k_multiple: int = 1  # K and N must be multiples of these (on top of GPU alignment)
    n_multiple: int = 1
    out_dtypes: tuple[torch.dtype, ...] | None = None  # None: any; else what was probed
    fused_bias: bool = False  # the kernel adds the bias itself (fp32 output needs a probe)
    probe_per_format: bool = True


def kernel_mode(
    name: str,
    forward: Forward,
    operands: OperandContract,
    k_multiple: int = 1,
    n_multiple: int = 1,
    out_dtypes: tuple[torch.dtype, ...] | None = None,
    fused_bias: bool = False,
) -> KernelMode:
    """A mode named as the decision in LINEAR_NATIVE_DISPATCH, probed as ``scaled_mm.<name>``."""
    return KernelMode(
        name,
        operands,
        probe=f"scaled_mm.{name}",
        forward=forward,
        k_multiple=k_multiple,
        n_multiple=n_multiple,
        out_dtypes=out_dtypes,
        fused_bias=fused_bias,
    )


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


_FP8 = frozenset({"e4m3fn", "e4m3fnuz"})
_PER_TENSOR = frozenset({(WHOLE, WHOLE)})
_PER_TENSOR_OR_ROW = frozenset({(WHOLE, WHOLE), (1, WHOLE)})
_PROBED_OUT = (torch.bfloat16,)
KERNELS: dict[str, KernelMode] = {
    mode.name: mode
    for mode in (
        kernel_mode(
            "tensorwise",
            _scaled_mm_forward,
            OperandContract(_FP8, FP32.name, _PER_TENSOR, _PER_TENSOR),
            fused_bias=True,
        ),
        kernel_mode(
            "rowwise",  # a per-tensor activation scale next to per-row weights: (M, 1)
            _scaled_mm_forward,
            OperandContract(_FP8, FP32.name, _PER_TENSOR_OR_ROW, _PER_TENSOR_OR_ROW),
            fused_bias=True,
        ),
        kernel_mode(
            "blockwise",
            _blockwise_forward,
            OperandContract(
                _FP8,
                FP32.name,
                frozenset({(FP8_BLOCK, FP8_BLOCK)}),
                frozenset({(1, FP8_BLOCK)}),
            ),
            FP8_BLOCK,
            FP8_BLOCK,
            _PROBED_OUT,
        ),
        kernel_mode(
            "mx",
            _mx_forward,
            OperandContract(
                frozenset(MX_OPERANDS),
                E8M0.name,
                frozenset({(1, MX_BLOCK)}),
                frozenset({(1, MX_BLOCK)}),
            ),
            MX_BLOCK,
            1,
            _PROBED_OUT,
        ),
    )
}

# ----------------------------------------------------------------- the dispatch table
# One row for every platform: the capability probe decides at run time whether a mode
# runs here. Every registered scheme is named once; adding one here is a deliberate act.
LINEAR_NATIVE_DISPATCH: DispatchTable = {
    ANY_PLATFORM: {
        "tensorwise": frozenset(
            {"fp8_per_tensor", "fp8_per_tensor_fnuz", "fp8_per_tensor_fnuz_clamp224"}
        ),
        "rowwise": frozenset(
            {
                "fp8_per_channel",
                "fp8_per_channel_fnuz",
                "fp8_per_channel_fnuz_clamp224",
                "fp8_w_per_channel_a_static",  # per-tensor A scale expanded to (M, 1)
                "fp8_w_per_channel_a_static_fnuz",
            }
        ),
        "blockwise": frozenset({"fp8_per_block", "fp8_per_block_fnuz"}),
        "mx": frozenset(
            {
                "w_mxfp8_a_mxfp8",
                "w_mxfp8_a_mxfp8@rceil",
                "w_mxfp4_a_mxfp4",
                "w_mxfp4_a_mxfp4@rceil",
                "w_mxfp4_a_mxfp4@even",
                "w_mxfp4_a_mxfp4@ceil",
            }
        ),
        # Weight-only or mixed element formats: no scaled-mm kernel takes them.
        EMULATE: frozenset(
            {
                "w_mxfp4",
                "w_mxfp4_a_fp8",
                # MXFP4 weights x per-token FP8 activations (aiter's gemm_a8wfp4 pairing):
                # torch's scaled mm takes one scale format on both operands.
                "w_mxfp4_a_fp8_per_token",
                "w_mxfp4_a_mxfp6_e2m3",
                "w_mxfp4_a_mxfp6_e3m2",
                "w_mxfp6_e2m3",
                "w_mxfp6_e2m3_a_fp8",
                "w_mxfp6_e2m3_a_mxfp6_e2m3",
                "w_mxfp6_e3m2",
                "w_mxfp6_e3m2_a_fp8",
                "w_mxfp6_e3m2_a_mxfp6_e3m2",
                # NVFP4 (two-level E4M3 x FP32 scales): no kernel mode here takes them;
                # torch's 1x16 block-scaled mm needs FP4 tensor cores (sm100+).
                "w_nvfp4",
                "w_nvfp4_a_nvfp4",
                # block FP8 with E8M0 (UE8M0) scales: the blockwise mode's contract is
                # float32 scales (DeepGEMM's packed UE8M0 layout is not wired)
                "fp8_per_block_ue8m0",
            }
        ),
    }
}
LINEAR_DISPATCH_HOME = "LINEAR_NATIVE_DISPATCH in harness/linear/paths/native.py"
# scheme name -> kernel mode, the table's one row read the other way round.
SCALED_MM_SCHEMES: dict[str, str] = native_decisions(LINEAR_NATIVE_DISPATCH[ANY_PLATFORM])


def linear_dispatch_problems(table: DispatchTable = LINEAR_NATIVE_DISPATCH) -> list[str]:
    """Everything wrong with the linear table, against the registry and the modes' contracts."""
    return dispatch_problems(SCHEMES, KERNELS, table)


def _scale_format(mode: KernelMode) -> str | None:
    operands = mode.operands
    return operands.scale_format if isinstance(operands, OperandContract) else None


def _why_unmapped(scheme: Scheme) -> str:
    """Why a scheme has no native kernel, from what the scheme is (for the support matrix)."""
    act = scheme.activation
    if act is None:
        detail = "activations stay unquantized; scaled-mm kernels take two quantized operands"
    elif act.format != scheme.weight.format:
        detail = f"mixed element formats ({scheme.weight.format} x {act.format})"
    elif get_format(act.format).torch_dtype is None and act.format not in MX_OPERANDS:
        detail = f"torch has no {act.format} operand type"
    elif all(_scale_format(mode) != act.scale_format for mode in KERNELS.values()):
        detail = f"no kernel mode here takes {act.scale_format} scales"
    else:
        detail = "not in SCALED_MM_SCHEMES"
    return f"emulated-only: no native kernel for {scheme.name} ({detail})"


class NativeScaledMMPath(LinearPathBase):
    """The platform's scaled GEMM kernels, as LINEAR_NATIVE_DISPATCH assigns them."""

    name = "native"
    is_reference = False

    def __init__(
        self,
        table: DispatchTable = LINEAR_NATIVE_DISPATCH,
        kernels: dict[str, KernelMode] = KERNELS,
    ) -> None:
        self.table = table
        self.kernels = kernels

    def mode_for(self, scheme: Scheme, platform: PlatformInfo) -> tuple[KernelMode | None, str]:
        """The kernel mode the table sends ``scheme`` to here, or None and the reason."""
        choice = choose(
            self.table,
            self.kernels,
            native_dispatch_key(platform),
            scheme,
            "linear native dispatch",
            LINEAR_DISPATCH_HOME,
        )
        if choice.decision is None or choice.decision == EMULATE:
            return None, _why_unmapped(scheme)
        return choice.kernel, choice.reason

    def _modes(self, scheme: Scheme) -> list[KernelMode]:
        """The modes any row of the table sends ``scheme`` to (no platform at hand)."""
        names = {d for row in self.table.values() for d, s in row.items() if scheme.name in s}
        return [self.kernels[d] for d in sorted(names) if d in self.kernels]

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Two roundings when the bias is added after the kernel's rounded output, else one."""
        modes = self._modes(scheme)
        fused = bool(modes) and all(mode.fused_bias for mode in modes)
        roundings = 1 if fused or not problem.bias else 2
        return Numerics(out_dtype=problem.out_dtype, output_roundings=roundings)

    @property
    def uses_capabilities(self) -> frozenset[str]:
        """Every probed capability this path can dispatch to (checked by the platform suite)."""
        used = {
            self.kernels[dec].capability(SCHEMES[name])
            for row in self.table.values()
            for name, dec in native_decisions(row).items()
            if dec in self.kernels and name in SCHEMES
        }
        return frozenset(used | {"scaled_mm.fp32_out_bias"})

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        """The kernel mode that runs ``scheme`` here (its name in the table)."""
        mode, reason = self.mode_for(scheme, platform)
        if mode is None:
            raise ValueError(reason)
        return mode.name

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        if platform.simulated and platform.simulated not in TORCH_KERNELS_AS_ARCH:
            return Support.no(not_the_simulated_arch(self.name, platform.simulated, platform.arch))
        mode, reason = self.mode_for(scheme, platform)
        if mode is None:
            return Support.no(reason)
        cap = mode.capability(scheme)
        if not capabilities.has(platform, cap):
            return Support.no(capabilities.why_not(platform, cap))
        if platform.is_cuda_alike and (problem.k % _CUDA_ALIGNMENT or problem.n % _CUDA_ALIGNMENT):
            return Support.no(
                f"scaled mm on {platform.device} needs K and N multiples of "
                f"{_CUDA_ALIGNMENT}, got K={problem.k} N={problem.n}"
            )
        if problem.k % mode.k_multiple or problem.n % mode.n_multiple:
            return Support.no(
                f"{mode.name} kernel needs K a multiple of {mode.k_multiple} and N of "
                f"{mode.n_multiple}, got K={problem.k} N={problem.n}"
            )
        if mode.out_dtypes is not None and problem.out_dtype not in mode.out_dtypes:
            return Support.no(
                f"{mode.name} kernel is probed with {', '.join(map(str, mode.out_dtypes))} "
                f"output only, not {problem.out_dtype}"
            )
        fp32_bias = mode.fused_bias and problem.bias and problem.out_dtype == torch.float32
        if fp32_bias and not capabilities.has(platform, "scaled_mm.fp32_out_bias"):
            return Support.no(capabilities.why_not(platform, "scaled_mm.fp32_out_bias"))
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        modes = self._modes(layer.scheme)
        if len(modes) != 1:
            raise ValueError(_why_unmapped(layer.scheme))
        mode = modes[0]
        accepted = mode.accepts(layer.scheme)
        if not accepted.ok:
            raise ValueError(f"{mode.name} cannot run {layer.scheme.name}: {accepted.reason}")
        operands = self.quantized_operands(layer, x, out_dtype)
        if operands.activation is None:
            raise ValueError(f"{layer.scheme.name}: native scaled mm needs quantized activations")
        return mode.forward(operands.activation, operands.weight, layer.bias, out_dtype)

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """What `forward` hands its kernel mode: the activation from the harness's quantizer,
        the loaded weight (the mode puts both into its kernel's layout)."""
        return QuantizedOperands(
            quantize_activation(x, layer.scheme, layer.input_scale), layer.weight
        )
