"""torchao's float8 linear through its tensor-level pieces, on CPU, as a qharness linear path.

torchao's `Float8DynamicActivationFloat8WeightConfig` refuses CPU (it asserts a CUDA
SM89+/MI300+/XPU device), but the tensor it builds, `Float8Tensor`, runs on CPU once it
carries a `Float8MMConfig` (the config sets one; without it the linear asserts): with
``KernelPreference.TORCH``, ``F.linear(x, weight)`` quantizes the activation itself
(`_choose_scale_float8` + `_quantize_affine_float8`, as `QuantizeTensorToFloat8Kwargs`
says) and calls `addmm_float8_unwrapped_inference`, i.e. ``torch._scaled_mm`` with both
scales and the bias.

What the adapter supplies: the checkpoint's float8 weight codes and float32 scales in
`Float8Tensor`'s layout (per-row scales [N, 1], block size [1, K]); the activation is cast
to the output dtype, which torchao computes in and returns.

Known finding (docs/ENGINE-FINDINGS.md): `_choose_scale_float8` divides amax by 448 in the
activation's dtype, so bf16 and fp16 activations get a scale rounded to that dtype (and in
fp16 a scale that underflows to 0 for rows with amax below 448 * 2^-25); float32 matches the
reference bit for bit.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torchao.float8.inference import Float8MMConfig
from torchao.quantization.granularity import PerRow
from torchao.quantization.quantize_.common import (
    KernelPreference,
    _choose_quant_func_and_quantize_tensor,
)
from torchao.quantization.quantize_.workflows.float8.float8_tensor import (
    Float8Tensor,
    QuantizeTensorToFloat8Kwargs,
)

from harness import (
    ANY_PLATFORM,
    EMULATE,
    SCHEMES,
    WHOLE,
    ActivationScales,
    DispatchTable,
    Kernel,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PlatformInfo,
    QuantizedLinear,
    QuantizedOperands,
    QuantizedTensor,
    QuantSpec,
    Scheme,
    Support,
    choose,
    platform_key,
    rest_emulated,
)
from qharness_torchao import ENGINE

# Schemes torchao's float8 linear runs from its tensor-level pieces here: e4m3fn weights
# with per-row scales and activations quantized dynamically per row (its PerRow recipe).
# Not here: static activation scales (a different config), 128x128 blocks (its blockwise
# gemm is a Triton kernel), e4m3fnuz.
FLOAT8_LINEAR_SCHEMES: tuple[str, ...] = ("fp8_per_channel",)
# What its PerRow recipe takes: e4m3fn on both operands, one float32 scale per row.
PER_ROW_E4M3FN = OperandContract(
    formats=frozenset({"e4m3fn"}),
    scale_format="fp32",
    weight_blocks=frozenset({(1, WHOLE)}),
    activation_blocks=frozenset({(1, WHOLE)}),
)


# torchao's Float8Tensor linear with its PerRow recipe: per-row e4m3fn operands, the
# activation quantized dynamically (torchao computes its scale); no probe, since
# torch._scaled_mm rowwise runs on CPU.
FLOAT8_ROWWISE = Kernel(
    "torchao_float8_linear",
    PER_ROW_E4M3FN,
    ActivationScales(static=frozenset(), why="torchao's PerRow recipe is dynamic"),
)


KERNELS: dict[str, Kernel] = {k.name: k for k in (FLOAT8_ROWWISE,)}
# One row for every platform: FLOAT8_LINEAR_SCHEMES to the kernel, every other scheme refused.
FLOAT8_LINEAR_DISPATCH: DispatchTable = {
    ANY_PLATFORM: rest_emulated({FLOAT8_ROWWISE.name: frozenset(FLOAT8_LINEAR_SCHEMES)}, SCHEMES)
}
OUT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16)
MM_CONFIG = Float8MMConfig(use_fast_accum=False)  # what the config sets by default


def float8_weight(layer: QuantizedLinear, dtype: torch.dtype) -> Float8Tensor:
    """The checkpoint's per-row e4m3fn weight as torchao's Float8Tensor holds it."""
    n, k = layer.weight.codes.shape
    act = QuantizeTensorToFloat8Kwargs(
        float8_dtype=torch.float8_e4m3fn,
        granularity=PerRow(),
        mm_config=MM_CONFIG,
        kernel_preference=KernelPreference.TORCH,
    )
    return Float8Tensor(
        layer.weight.codes.view(torch.float8_e4m3fn),
        layer.weight.scale.reshape(n, 1).float(),
        block_size=[1, k],
        mm_config=MM_CONFIG,
        act_quant_kwargs=act,
        kernel_preference=KernelPreference.TORCH,
        dtype=dtype,
    )


class TorchaoFloat8LinearPath(LinearPathBase):
    """``F.linear`` on a torchao `Float8Tensor` weight (torch._scaled_mm), CPU or any device."""

    name = "torchao_float8_linear"
    activation_in_model_dtype = (
        "the adapter hands torchao the activation in the model (output) dtype, as a bf16 "
        "model's linear layers receive it: x.to(out_dtype) before torchao quantizes it"
    )
    engine = ENGINE
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            "torchao float8 dynamic activation scale is amax / 448 computed in the activation "
            "dtype (_choose_scale_float8 divides before casting to float32): in bf16/fp16 the "
            "scale is rounded to 8/11 bits, so codes and outputs move off the float32 "
            "definition (a scale rounded down saturates the row's largest element); in fp16 "
            "a row with amax below 448 * 2^-25 gets scale 0 and NaN outputs",
            suites=frozenset({"linear"}),
            out_dtypes=frozenset({torch.bfloat16, torch.float16}),
        ),
    )

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return "torchao Float8Tensor linear (KernelPreference.TORCH, torch._scaled_mm)"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Exact float8 operands, float32 accumulation with the scales applied, one rounding."""
        return Numerics(out_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        here = platform_key(platform)
        choice = choose(FLOAT8_LINEAR_DISPATCH, KERNELS, here, scheme, "torchao float8", __name__)
        if choice.kernel is None and choice.decision not in (EMULATE, None):
            return Support.no(choice.reason)  # the table sends it to a kernel that refuses it
        if choice.kernel is None:
            return Support.no(
                f"{self.name}: runs {', '.join(FLOAT8_LINEAR_SCHEMES)} only (e4m3fn per-row "
                "weight, dynamic per-row activation)"
            )
        if problem.out_dtype not in OUT_DTYPES:
            return Support.no(f"{self.name}: torchao computes in bf16/fp16/float32 only")
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        weight = float8_weight(layer, out_dtype)
        bias = None if layer.bias is None else layer.bias.to(out_dtype)
        return F.linear(x.to(out_dtype), weight, bias)

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """The `Float8Tensor` weight `forward` builds, and the activation torchao's float8
        linear makes of `forward`'s input (`_choose_quant_func_and_quantize_tensor` with the
        weight's `act_quant_kwargs`, as its linear calls it), both read back: float8 bytes as
        codes, per-row float32 scales as [rows, 1]."""
        act = layer.scheme.activation
        if act is None:
            raise ValueError(f"{self.name}: {layer.scheme.name} has no activation quantization")
        weight = float8_weight(layer, out_dtype)
        a = _choose_quant_func_and_quantize_tensor(x.to(out_dtype), weight.act_quant_kwargs)

        def back(t: Float8Tensor, spec: QuantSpec) -> QuantizedTensor:
            rows = t.qdata.shape[0]
            return QuantizedTensor(
                t.qdata.view(torch.uint8), t.scale.float().reshape(rows, 1), spec
            )

        return QuantizedOperands(back(a, act), back(weight, layer.weight.spec))
