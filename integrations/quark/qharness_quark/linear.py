"""Quark's imported FP8 linear (`QParamsLinear`, CPU) as a qharness linear path.

What runs is Quark's: a `QParamsLinear` built by its import builder from a `QLayerConfig`
(FP8 e4m3fn weight, static; input static per tensor or dynamic per token) holds the
checkpoint's float8 weight, weight scale, input scale and bias as Quark loads them, and its
forward on CPU (`_forward_generic`; the `torch._scaled_mm` branch is ROCm-only)
dequantizes the weight (`quark.torch.kernel.dequantize`), fake-quantizes the input with its
static scale (`scaled_fake_quantize`) or its dynamic per-token quantizer, and calls
``F.linear`` in the input's dtype.

What the adapter supplies: the tensors (golden codes viewed as float8_e4m3fn, scales and
bias copied into Quark's parameters and buffers); nothing numeric.

Output dtypes, a declared convention (Quark's design, not a finding): `_forward_generic`,
"Generic forward path using F.linear with dequantized weight", casts the dequantized
weight (float32 code * scale, `dequantize_fp8_per_channel_with_scale`) and the
fake-quantized input to the input's dtype (``.to(dtype)``) and calls ``F.linear`` there;
`numerics` declares exactly that (operands rounded to the output dtype, float32 sum, one
rounding), and the bounds and interval checks follow from it. Exact for power-of-two
scales (the per-tensor goldens' cases match bit for bit).

The finding (docs/ENGINE-FINDINGS.md) is narrower: the activation fake-quantize divides
x by its scale in the model dtype (the per-token scale is cast with
``scale.to(inputs_dtype)``; a 0-d per-tensor scale does not promote a bf16 input), so
the FP8 codes of bf16/fp16 activations differ from Quark's own float32 quantizer; those
cases run and are recorded as xfail with it.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from quark.torch.export.nn.modules.qparamslinear import QParamsLinear
from quark.torch.quantization.config.config import (
    FP8E4M3PerChannelSpec,
    FP8E4M3PerTensorSpec,
    QLayerConfig,
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
    QuantSpec,
    Scheme,
    Support,
    choose,
    platform_key,
    rest_emulated,
)
from qharness_quark import ENGINE

# The schemes Quark's imported linear runs here: FP8 e4m3fn weights per tensor or per
# channel (static, as QParamsLinear requires) with a static per-tensor input scale or a
# dynamic per-token one (Quark's per-channel input quantizer, ch_axis 0 of [M, K]).
FP8_LINEAR_SCHEMES: tuple[str, ...] = (
    "fp8_per_tensor",
    "fp8_w_per_channel_a_static",
    "fp8_per_channel",
)
# What QParamsLinear takes: e4m3fn on both operands, float32 scales per tensor or per row.
QPARAMS_OPERANDS = OperandContract(
    formats=frozenset({"e4m3fn"}),
    scale_format="fp32",
    weight_blocks=frozenset({(WHOLE, WHOLE), (1, WHOLE)}),
    activation_blocks=frozenset({(WHOLE, WHOLE), (1, WHOLE)}),
)


# Quark's QParamsLinear forward: FP8 operands, and an input quantizer that is static per
# tensor or dynamic per token (per row); no probe, since its CPU forward is dequantize +
# F.linear.
QPARAMS_LINEAR = Kernel(
    "quark_qparams_linear",
    QPARAMS_OPERANDS,
    ActivationScales(
        dynamic=frozenset({(1, WHOLE)}),
        static=frozenset({(WHOLE, WHOLE)}),
        why="Quark's input quantizer is static per tensor or dynamic per token",
    ),
)


KERNELS: dict[str, Kernel] = {k.name: k for k in (QPARAMS_LINEAR,)}
# One row for every platform: FP8_LINEAR_SCHEMES to the kernel, every other scheme refused.
FP8_LINEAR_DISPATCH: DispatchTable = {
    ANY_PLATFORM: rest_emulated({QPARAMS_LINEAR.name: frozenset(FP8_LINEAR_SCHEMES)}, SCHEMES)
}
# Quark's CPU design, declared as this path's numerics (operands in the model dtype): not a
# finding. What is one: its activation fake-quantize divides in the model dtype.
ACTIVATION_DIVIDES_IN_MODEL_DTYPE = (
    "Quark's activation fake-quantize divides by the scale in the model dtype "
    "(fake_quantize_fp8_per_channel_with_scale casts the per-token scale with "
    "scale.to(inputs_dtype); the static per-tensor one divides a bf16/fp16 input by a 0-d "
    "float32 scale, which type promotion keeps in bf16/fp16), so x / scale is rounded to the "
    "model dtype before the FP8 cast and codes differ from Quark's own float32 quantizer "
    "(real_quantize_fp8_e4m3): measured 3.1% of bf16 and 0.24% of fp16 codes on seeded "
    "normal activations, none in float32"
)


def _quark_spec(spec: QuantSpec, dynamic: bool) -> FP8E4M3PerTensorSpec | FP8E4M3PerChannelSpec:
    if spec.granularity == "per_row":
        return FP8E4M3PerChannelSpec(ch_axis=0, is_dynamic=dynamic)
    return FP8E4M3PerTensorSpec(is_dynamic=dynamic)


def quark_linear(layer: QuantizedLinear) -> QParamsLinear:
    """The checkpoint's layer as Quark's import builds and loads it."""
    scheme = layer.scheme
    act = scheme.activation
    if act is None or (layer.input_scale is None) != act.dynamic:
        raise ValueError(f"{scheme.name}: Quark's imported linear needs an input quantizer")
    n, k = layer.weight.codes.shape
    config = QLayerConfig(
        weight=_quark_spec(scheme.weight, dynamic=False).to_quantization_spec(),
        input_tensors=_quark_spec(act, dynamic=act.dynamic).to_quantization_spec(),
    )
    shell = torch.nn.Linear(k, n, bias=layer.bias is not None, device="meta")
    linear = QParamsLinear(shell, custom_mode="quark", pack_method="reorder", quant_config=config)
    state = {
        "weight": layer.weight.codes.view(torch.float8_e4m3fn),
        "weight_quantizer.scale": layer.weight.scale.reshape(linear.weight_quantizer.scale.shape),
    }
    if layer.input_scale is not None:
        shape = linear.input_quantizer.scale.shape
        state["input_quantizer.scale"] = layer.input_scale.reshape(shape)
    if layer.bias is not None:
        state["bias"] = layer.bias.float()
    linear.load_state_dict(state, assign=True)
    return linear.eval()


class QuarkFP8LinearPath(LinearPathBase):
    """Quark's `QParamsLinear` forward on CPU (dequantize, fake-quantize input, F.linear)."""

    name = "quark_qparams_linear"
    engine = ENGINE
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(
            ACTIVATION_DIVIDES_IN_MODEL_DTYPE,
            # fp8_per_tensor: its static scale divides in the model dtype too; the golden
            # cases' power-of-two scales hide it, the designed ones (static_ties, long_k) do not
            schemes=frozenset({"fp8_per_channel", "fp8_w_per_channel_a_static", "fp8_per_tensor"}),
            suites=frozenset({"linear"}),
            out_dtypes=frozenset({torch.bfloat16, torch.float16}),
        ),
    )

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return "quark QParamsLinear._forward_generic"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Operands in the output dtype (exact in float32, and in bf16/fp16 for power-of-two
        scales; per-channel bf16/fp16 is the known finding), float32 sum, one rounding."""
        return Numerics(out_dtype=problem.out_dtype, operand_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        here = platform_key(platform)
        choice = choose(FP8_LINEAR_DISPATCH, KERNELS, here, scheme, "Quark linear", __name__)
        if choice.kernel is None and choice.decision not in (EMULATE, None):
            return Support.no(choice.reason)  # the table sends it to a kernel that refuses it
        if choice.kernel is None:
            return Support.no(
                f"{self.name}: FP8 e4m3fn per-tensor/per-channel schemes only "
                f"({', '.join(FP8_LINEAR_SCHEMES)})"
            )
        if platform.device != "cpu":
            return Support.no(f"{self.name}: CPU only (on ROCm Quark takes torch._scaled_mm)")
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        with torch.no_grad():
            y: torch.Tensor = quark_linear(layer)(x.to(out_dtype))
        return y
