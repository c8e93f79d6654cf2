"""torchao's MX linear, as torchao runs it on CPU, as a qharness linear path.

What runs is torchao's: ``F.linear(x, weight, bias)`` with ``weight`` an `MXTensor` built
the way `MXDynamicActivationMXWeightConfig` builds one (swizzled E8M0 scales, an activation
cast described by `QuantizeTensorToMXKwargs`) with ``KernelPreference.EMULATED``, the only
kernel choice that runs without an SM100 GPU. torchao then casts the activation itself
(`MXTensor.to_mx`), dequantizes both operands to the activation's dtype (`to_dtype`) and
calls ``aten.addmm(bias, a, w)`` (``aten.mm`` without bias) in that dtype.

What the adapter supplies: the weight's element codes and E8M0 scales come from the
harness's checkpoint (the golden), put into torchao's layout (float8 bytes, FP6 one code
per byte, FP4 packed low nibble first, scales swizzled with torchao's `to_blocked`), as a
pre-quantized checkpoint would be loaded (`MXTensor.from_qdata_and_scales` does the same
for float8). The activation is made contiguous (``to_mx`` asserts contiguity) and cast to
the output dtype, which torchao computes in and returns.

Unlike the config (bf16 only, one element dtype on both operands), the tensor-level API
runs float32 activations and mixed weight/activation element formats: the scheme table
below lists what it runs; everything else skips with the reason.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torchao.prototype.mx_formats.mx_tensor import MXTensor, QuantizeTensorToMXKwargs
from torchao.prototype.mx_formats.utils import (
    from_blocked,
    hp_data_dims_to_swizzled_scale_dims_mx,
    to_blocked,
)
from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_
from torchao.quantization.quantize_.common import KernelPreference

from harness import (
    ANY_PLATFORM,
    E8M0,
    EMULATE,
    MX_BLOCK,
    SCHEMES,
    DispatchTable,
    Kernel,
    LinearPathBase,
    LinearProblem,
    Numerics,
    PlatformInfo,
    QuantizedLinear,
    QuantizedOperands,
    QuantizedTensor,
    QuantSpec,
    Scheme,
    SpecCheck,
    Support,
    choose,
    dispatch_problems,
    e8m0_decode,
    e8m0_encode,
    pack_fp4,
    platform_key,
    rest_emulated,
)
from qharness_torchao import ENGINE
from qharness_torchao.quantizer import ELEMENT_DTYPES, MODES, to_harness_codes

# The schemes torchao's MX linear runs: MX weight and MX activation (1x32 E8M0 scales,
# element dtypes torchao has, its scale modes). Not here, with the reason supports() gives:
# weight-only MX (torchao asserts "weight-only quant not yet supported"), and FP8 with
# float32 scales (its float8 config, whose refusal fp8_refusal reports).
MX_LINEAR_SCHEMES: tuple[str, ...] = (
    "w_mxfp8_a_mxfp8",
    "w_mxfp8_a_mxfp8@rceil",
    "w_mxfp6_e2m3_a_mxfp6_e2m3",
    "w_mxfp6_e3m2_a_mxfp6_e3m2",
    "w_mxfp4_a_mxfp4",
    "w_mxfp4_a_mxfp4@ceil",
    "w_mxfp4_a_mxfp4@even",
    "w_mxfp4_a_mxfp4@rceil",
    "w_mxfp4_a_fp8",
    "w_mxfp4_a_mxfp6_e2m3",
    "w_mxfp4_a_mxfp6_e3m2",
    "w_mxfp6_e2m3_a_fp8",
    "w_mxfp6_e3m2_a_fp8",
)
# Dtypes to_mx takes for the activation (it asserts bfloat16 or float32); torchao returns
# its result in the activation's dtype, so these are the output dtypes it can produce.
COMPUTE_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float32)


@cache
def fp8_refusal() -> str:
    """Why FP8 schemes with float32 scales do not run here: they are torchao's float8
    recipe, not MX; `torchao_float8_linear` runs them from its tensor-level pieces, because
    its float8 inference config, asked to quantize a tiny bf16 linear here, refuses (on CPU
    it asserts a CUDA SM89+/MI300+/XPU device); the refusal is quoted."""
    layer = torch.nn.Linear(MX_BLOCK, MX_BLOCK, dtype=torch.bfloat16)
    try:
        quantize_(layer, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    except Exception as exc:  # the refusal is the reason shown
        refusal = f"its Float8DynamicActivationFloat8WeightConfig refuses this platform: {exc}"
    else:
        refusal = "its Float8DynamicActivationFloat8WeightConfig runs here"
    return f"torchao MX linear: FP8 with float32 scales is torchao_float8_linear's ({refusal})"


def _mx_spec_problem(spec: QuantSpec | None, role: str) -> str:
    """Why ``spec`` is not an operand torchao's MX linear takes ('' when it is)."""
    if spec is None:
        return f"{role} is not quantized"
    if spec.scale_fmt is not E8M0 or spec.block != (1, MX_BLOCK):
        return f"{role} is not MX (1x{MX_BLOCK} E8M0 scales)"
    if spec.format not in ELEMENT_DTYPES:
        return f"torchao has no {spec.format} element dtype"
    if spec.scale_rounding not in MODES:
        return f"torchao has no {spec.scale_rounding} scale mode"
    return ""


# torchao's MX linear (to_mx, then its emulated MX matmul): MX operands on both sides, the
# element dtypes and scale modes torchao has (weight and activation formats may differ);
# no probe, since the emulated MX kernel runs wherever torch does.
TO_MX_LINEAR = Kernel("torchao_mx_linear", SpecCheck(_mx_spec_problem))


KERNELS: dict[str, Kernel] = {k.name: k for k in (TO_MX_LINEAR,)}
# One row for every platform: MX_LINEAR_SCHEMES to the kernel, every other registered
# scheme refused (EMULATE: torchao has no kernel for it; supports() says why).
MX_LINEAR_DISPATCH: DispatchTable = {
    ANY_PLATFORM: rest_emulated({TO_MX_LINEAR.name: frozenset(MX_LINEAR_SCHEMES)}, SCHEMES)
}


def table_problems() -> list[str]:
    """Everything wrong with MX_LINEAR_DISPATCH: unknown schemes, or schemes sent to the
    kernel that its contract refuses (harness's dispatch-table check)."""
    return dispatch_problems(SCHEMES, KERNELS, MX_LINEAR_DISPATCH)


def _refusal(scheme: Scheme) -> str:
    """The reason a scheme outside the table does not run."""
    if scheme.weight.scale_fmt is not E8M0:
        return fp8_refusal()
    if scheme.activation is None:
        return "torchao MX linear: weight-only quant not yet supported (torchao's assertion)"
    problem = _mx_spec_problem(scheme.activation, "activation") or _mx_spec_problem(
        scheme.weight, "weight"
    )
    return f"torchao MX linear: {problem or 'not in its scheme table'}"


def mx_weight(weight: QuantizedTensor, dtype: torch.dtype, act: QuantSpec) -> MXTensor:
    """The checkpoint's weight [N, K] as torchao's MX inference config holds it."""
    spec = weight.spec
    n, k = weight.codes.shape
    if spec.format == "e2m1":
        qdata = pack_fp4(weight.codes)
    elif spec.format in ("e4m3fn", "e5m2"):
        qdata = weight.codes.view(ELEMENT_DTYPES[spec.format])  # type: ignore[arg-type]
    else:
        qdata = weight.codes
    scale = e8m0_encode(weight.scale).view(torch.float8_e8m0fnu)
    rows, cols = hp_data_dims_to_swizzled_scale_dims_mx(n, k)
    swizzled = to_blocked(scale.reshape(n, k // MX_BLOCK)).flatten().view(rows, cols)
    act_kwargs = QuantizeTensorToMXKwargs(
        elem_dtype=ELEMENT_DTYPES[act.format],
        block_size=MX_BLOCK,
        scaling_mode=MODES[act.scale_rounding],
        kernel_preference=KernelPreference.EMULATED,
        is_swizzled_scales=True,
    )
    return MXTensor(
        qdata.contiguous(),
        swizzled,
        ELEMENT_DTYPES[spec.format],
        MX_BLOCK,
        dtype,
        KernelPreference.EMULATED,
        act_kwargs,
        True,
    )


def mx_activation(x: torch.Tensor, weight: MXTensor) -> MXTensor:
    """The activation as torchao's MX matmul quantizes it (`_addmm_mx_dispatch`: `to_mx`
    with the weight's `act_quant_kwargs`, argument for argument)."""
    k = weight.act_quant_kwargs
    return MXTensor.to_mx(
        x, k.elem_dtype, k.block_size, k.scaling_mode, k.kernel_preference, k.is_swizzled_scales
    )


def harness_operand(t: MXTensor, spec: QuantSpec) -> QuantizedTensor:
    """An `MXTensor` [rows, K] back in the harness's layout: one code per element (FP4
    unpacked low nibble first), E8M0 scale bytes unswizzled (torchao's `from_blocked`)
    and decoded to float32."""
    rows = t.qdata.shape[0]
    cols = t.qdata.shape[1] * (2 if spec.format == "e2m1" else 1)
    codes = to_harness_codes(t.qdata, spec.format, torch.Size((rows, cols)))
    raw = t.scale.view(torch.uint8)
    if t.is_swizzled_scales:
        raw = from_blocked(raw.flatten(), rows, cols // MX_BLOCK)
    return QuantizedTensor(codes, e8m0_decode(raw.reshape(rows, cols // MX_BLOCK)), spec)


class TorchaoMXLinearPath(LinearPathBase):
    """``F.linear`` on torchao MXTensors (emulated kernel), CPU or any device."""

    name = "torchao_mx_linear"
    activation_in_model_dtype = (
        "the adapter hands torchao the activation in the model (output) dtype, as a bf16 "
        "model's linear layers receive it: x.to(out_dtype) before torchao quantizes it"
    )
    engine = ENGINE

    def __init__(self) -> None:
        problems = table_problems()
        if problems:
            raise ValueError(f"MX_LINEAR_SCHEMES is wrong: {'; '.join(problems)}")

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return "torchao MXTensor linear (KernelPreference.EMULATED)"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Operands are dequantized to the output dtype (exact: MX values times powers of two
        stay within bf16/float32 range and precision), then one addmm in that dtype."""
        return Numerics(out_dtype=problem.out_dtype, operand_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        here = platform_key(platform)
        choice = choose(MX_LINEAR_DISPATCH, KERNELS, here, scheme, "torchao MX linear", __name__)
        if choice.decision in (EMULATE, None):  # not in the table: torchao's own reason
            return Support.no(_refusal(scheme))
        if choice.kernel is None:  # the table sends it to a kernel that refuses it
            return Support.no(choice.reason)
        if problem.out_dtype not in COMPUTE_DTYPES:
            return Support.no(
                f"torchao to_mx takes bfloat16 or float32 activations, not {problem.out_dtype} "
                "(and returns the activation's dtype)"
            )
        if problem.k % MX_BLOCK:
            return Support.no(
                f"torchao to_mx: K={problem.k} is not a multiple of {MX_BLOCK} "
                "(no partial MX blocks)"
            )
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        act = layer.scheme.activation
        if act is None:
            raise ValueError(f"{self.name}: {layer.scheme.name} has no activation quantization")
        weight = mx_weight(layer.weight, out_dtype, act)
        bias = None if layer.bias is None else layer.bias.to(out_dtype)
        return F.linear(x.to(out_dtype).contiguous(), weight, bias)

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """The weight `MXTensor` `forward` builds and the activation torchao's MX matmul
        makes of `forward`'s input (`mx_activation`), both read back (`harness_operand`)."""
        act = layer.scheme.activation
        if act is None:
            raise ValueError(f"{self.name}: {layer.scheme.name} has no activation quantization")
        weight = mx_weight(layer.weight, out_dtype, act)
        a = mx_activation(x.to(out_dtype).contiguous(), weight)
        return QuantizedOperands(
            harness_operand(a, act), harness_operand(weight, layer.weight.spec)
        )
