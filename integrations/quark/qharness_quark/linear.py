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

Output dtypes: Quark computes in the input's dtype. In bf16/fp16 it rounds the
dequantized weight (code * scale) and the fake-quantized input to that dtype, and casts a
per-channel scale itself to it (`scale.to(inputs_dtype)`), so operands are exact only when
the scales are powers of two. The linear suite's bounds assume exact operands, so bf16/fp16
run only for per-tensor weights, whose scales in the harness's goldens are powers of two
(a golden with other scales would show up as failures, not pass silently); per-channel
weights run in float32 and skip bf16/fp16 with that reason.
"""

from __future__ import annotations

import torch
from quark.torch.export.nn.modules.qparamslinear import QParamsLinear
from quark.torch.quantization.config.config import (
    FP8E4M3PerChannelSpec,
    FP8E4M3PerTensorSpec,
    QLayerConfig,
)

from harness.core.quantize import QuantizedLinear
from harness.core.schemes import Scheme
from harness.core.spec import QuantSpec
from harness.paths.base import LinearPathBase, LinearProblem, Numerics, Support
from harness.platform.info import PlatformInfo
from qharness_quark import ENGINE

# The schemes Quark's imported linear runs here: FP8 e4m3fn weights per tensor or per
# channel (static, as QParamsLinear requires) with a static per-tensor input scale or a
# dynamic per-token one (Quark's per-channel input quantizer, ch_axis 0 of [M, K]).
FP8_LINEAR_SCHEMES: tuple[str, ...] = (
    "fp8_per_tensor",
    "fp8_w_per_channel_a_static",
    "fp8_per_channel",
)
# Output dtypes per weight-scale granularity (see the module docstring for why).
OUT_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "per_tensor": (torch.float32, torch.bfloat16, torch.float16),
    "per_row": (torch.float32,),
}


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

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return "quark QParamsLinear._forward_generic"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Operands in the output dtype (exact for the power-of-two per-tensor scales that
        run in bf16/fp16; float32 otherwise), a float32 sum, one rounding to the output."""
        return Numerics(out_dtype=problem.out_dtype, operand_dtype=problem.out_dtype)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        if scheme.name not in FP8_LINEAR_SCHEMES:
            return Support.no(
                f"{self.name}: FP8 e4m3fn per-tensor/per-channel schemes only "
                f"({', '.join(FP8_LINEAR_SCHEMES)}), not {scheme.name}"
            )
        if problem.out_dtype not in OUT_DTYPES[scheme.weight.granularity]:
            return Support.no(
                f"{self.name}: per-channel weights in float32 only; in {problem.out_dtype} "
                "Quark casts the per-channel scales and both operands to that dtype before the "
                "matmul, which the suite's bounds (exact operands) do not model"
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
