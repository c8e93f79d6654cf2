"""Quark's FP8 (e4m3fn) per-tensor and per-channel quantization, on CPU, as a quantizer.

Everything numeric is Quark's: the scale comes from the observer its public config builds
(`FP8E4M3PerTensorSpec` / `FP8E4M3PerChannelSpec(ch_axis=0)` ->
`QTensorConfig.observer_cls`, whose `calculate_fp8_quant_parameters` computes amax / 448
in float32), and the codes from its real-quantize kernel
(`hw_emulation_interface.real_quantize_fp8_e4m3`: x / scale, clamp to +-448, cast to
float8_e4m3fn). A static scale the suite supplies goes straight to that kernel, as a
calibrated scale would. The adapter only views the float8 result as bytes and puts the
scale on the harness's tile grid.

Quark has no e4m3fnuz quantizer: its FP8 dtype is e4m3fn, and e4m3fnuz appears only as
the export-time conversion of e4m3fn checkpoints (`quark.torch.utils.e4m3fn_to_e4m3fnuz`),
which is a loader step, not a quantizer; fnuz specs skip with that reason.
"""

from __future__ import annotations

import torch
from quark.torch.kernel.hw_emulation.hw_emulation_interface import real_quantize_fp8_e4m3
from quark.torch.quantization.config.config import (
    FP8E4M3PerChannelSpec,
    FP8E4M3PerTensorSpec,
)

from harness import (
    FP32,
    QuantizedTensor,
    QuantSpec,
    Support,
)
from qharness_quark import ENGINE

# harness granularity -> (Quark's qscheme name, its config spec); per_row is a row of the
# [rows, K] tensor, Quark's per-channel with ch_axis=0 (a weight's output channel, an
# activation's token).
GRANULARITIES = {
    "per_tensor": ("per_tensor", FP8E4M3PerTensorSpec(scale_type="float", is_dynamic=True)),
    "per_row": ("per_channel", FP8E4M3PerChannelSpec(ch_axis=0, is_dynamic=True)),
}


class RealQuantizeFP8Quantizer:
    name = "quark_real_quantize_fp8"
    engine = ENGINE
    # its min-max observer replaces a zero scale by float32 eps (a documented guard)
    conventions: frozenset[str] = frozenset({"zero_scale_as_fp32_eps"})

    def supports(self, spec: QuantSpec) -> Support:
        if spec.scale_fmt is not FP32:
            return Support.no(f"{self.name}: float32 scales only, not {spec.scale_format}")
        if spec.format != "e4m3fn":
            return Support.no(
                f"{self.name}: Quark quantizes FP8 to e4m3fn only, not {spec.format} (its "
                "e4m3fnuz is an export-time conversion of e4m3fn checkpoints)"
            )
        if spec.granularity not in GRANULARITIES:
            return Support.no(
                f"{self.name}: per-tensor and per-channel only (Quark has FP8 per-group as "
                f"fake-quantize only, no real-quantize kernel), not {spec.granularity}"
            )
        return Support.yes()

    def quantize(
        self, x: torch.Tensor, spec: QuantSpec, scale: torch.Tensor | None = None
    ) -> QuantizedTensor:
        qscheme, quark_spec = GRANULARITIES[spec.granularity]
        hp = x.float().contiguous()
        if scale is None:
            qspec = quark_spec.to_quantization_spec()
            observer = qspec.observer_cls(qspec)  # type: ignore[misc]
            observer(hp)
            scale, _ = observer._calculate_qparams()
        per_channel = qscheme == "per_channel"
        kernel_scale = scale.float().reshape(-1 if per_channel else ())
        codes = real_quantize_fp8_e4m3(hp, kernel_scale, axis=0, qscheme=qscheme)
        grid = (hp.shape[0], 1) if per_channel else (1, 1)
        return QuantizedTensor(
            codes.view(torch.uint8), scale.float().reshape(grid).contiguous(), spec
        )
