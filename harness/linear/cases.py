"""Linear-layer cases: the shape table, the suite's parameter grid and its golden builder.

Data flow for one case: scheme -> seeded inputs -> quantize (codes + scales, stored in the
golden as the "checkpoint") -> load as a `QuantizedLinear` -> run a path -> compare with
the golden's float64-derived reference and, for non-emulated paths, with the emulated path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.inputs import (
    bias_vector,
    calibration_batch,
    plant_corners,
    scaled_normal,
    static_scale_for,
)
from harness.core.quantize import (
    QuantizedLinear,
    QuantizedTensor,
    quantize_activation,
    quantize_linear,
    scale_from_stored,
    static_scale_from_stored,
    stored_scale,
    stored_static_scale,
)
from harness.core.schemes import SCHEMES, get_scheme
from harness.linear.paths import linear_paths
from harness.paths import LinearProblem
from harness.paths.case import Case
from harness.paths.operands import exposes_operands
from harness.store.golden_registry import GoldenData, regenerated, register_each, tensor_digest

# M x N x K. M=1 is the decode case; 37 is not a multiple of 16. The first three have K a
# multiple of 128 (whole blocks: one or two 128-blocks, four or eight MX blocks per row);
# N=128 with K=256 is the one shape the 128x128-block native kernels take (they need N and
# K multiples of 128). The last has partial blocks everywhere: K=176 is 5.5 MX blocks and
# 1.375 128-blocks, N=144 is 1.125 128-row blocks (both dimensions with several blocks, the
# last partial), still multiples of 16 for GPU scaled mm. Shapes stay small: every scheme
# stores its codes, scales and reference in the golden store; the float activations and
# weights are regenerated from their seeds and pinned by a digest (`bf16_digest`).
LINEAR_SHAPES: tuple[tuple[int, int, int], ...] = (
    (37, 16, 128),
    (1, 16, 256),
    (8, 128, 256),
    (3, 144, 176),
)
# How each shape's activation reaches the path: the suite feeds some as views that are not
# row-major contiguous, as engines do (a transposed buffer, every other column of a wider
# one), so a path that assumes contiguity or reads storage directly is caught.
ACTIVATION_LAYOUTS: dict[tuple[int, int, int], str] = {
    (37, 16, 128): "transposed",
    (1, 16, 256): "strided",
    (8, 128, 256): "contiguous",
    (3, 144, 176): "transposed",
}
OUT_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}
# Outputs are normalized (a power-of-two factor on W) so that max|y| is about 2^12: within
# fp16's range (65504) with room for the bias, so every output dtype can hold every case.
OUTPUT_MAGNITUDE = 2.0**12


def shape_id(shape: tuple[int, int, int]) -> str:
    return "x".join(str(d) for d in shape)


GOLDEN_ENTRY = "linear/{scheme}"  # one golden entry per scheme: every shape's tensors


def golden_entry(scheme: str) -> str:
    return GOLDEN_ENTRY.format(scheme=scheme)


@dataclass(frozen=True)
class LinearCase(Case):
    SUITE = "linear"
    ID = ("scheme", "path", "shape", "bias", "out_dtype")
    RECORD = ("scheme", "path", "shape", "bias", "out_dtype")
    FINDING_SUITE = "linear"
    GOLDEN = GOLDEN_ENTRY

    scheme: str
    path: str
    shape: tuple[int, int, int]
    bias: bool
    out_dtype: str

    @property
    def problem(self) -> LinearProblem:
        m, n, k = self.shape
        return LinearProblem(m, n, k, self.bias, OUT_DTYPES[self.out_dtype])


def linear_cases() -> Iterator[LinearCase]:
    for scheme in sorted(SCHEMES):
        for path in linear_paths():
            for shape in LINEAR_SHAPES:
                for bias in (True, False):
                    for out_dtype in OUT_DTYPES:
                        yield LinearCase(scheme, path, shape, bias, out_dtype)


@dataclass(frozen=True)
class OperandCase(Case):
    """One call whose quantized operands a path shows (`harness.paths.operands`): no bias
    (it is no operand); the output dtype stays, since a path may cast its activation to it.
    An engine's linear findings cover its operands too."""

    SUITE = "linear_operands"
    ID = ("scheme", "path", "shape", "out_dtype")
    RECORD = ("scheme", "path", "shape", "out_dtype")
    FINDING_SUITE = "linear"
    GOLDEN = GOLDEN_ENTRY

    scheme: str
    path: str
    shape: tuple[int, int, int]
    out_dtype: str

    @property
    def problem(self) -> LinearProblem:
        m, n, k = self.shape
        return LinearProblem(m, n, k, False, OUT_DTYPES[self.out_dtype])


def operand_cases() -> Iterator[OperandCase]:
    """Every scheme x shape x output dtype, for the paths that show their operands only:
    the check does not apply to the others, so they get no case (not a skip per case)."""
    showing = [name for name, path in linear_paths().items() if exposes_operands(path)]
    for scheme in sorted(SCHEMES):
        for path in showing:
            for shape in LINEAR_SHAPES:
                for out_dtype in OUT_DTYPES:
                    yield OperandCase(scheme, path, shape, out_dtype)


@dataclass(frozen=True)
class QuantizeCase(Case):
    SUITE = "quantize"
    ID = ("scheme", "shape")
    RECORD = ("scheme", "shape")
    GOLDEN = GOLDEN_ENTRY

    scheme: str
    shape: tuple[int, int, int]


def quantize_cases() -> Iterator[QuantizeCase]:
    for scheme in sorted(SCHEMES):
        for shape in LINEAR_SHAPES:
            yield QuantizeCase(scheme, shape)


# ------------------------------------------------------------------------ goldens
def normalize_output(
    x: torch.Tensor, w: torch.Tensor, magnitude: float = OUTPUT_MAGNITUDE
) -> torch.Tensor:
    """Scale W by a power of two (exact) so that max|x @ W^T| is about ``magnitude``."""
    peak = (x.double() @ w.double().t()).abs().max().item()
    exponent = round(torch.tensor(magnitude / peak).log2().item())
    return w * 2.0**exponent


def linear_inputs(scheme_name: str, shape: tuple[int, int, int]) -> dict[str, torch.Tensor]:
    """Seeded x [M,K], w [N,K], bias [N] and the static-scale calibration batch (bf16 values).

    Both operands carry corner values where their quantizer sees them (`plant_corners`):
    ties at several binades, subnormals, the clamp bound. A static activation scale is a
    power of two calibrated on a different batch (`calibration_batch`), and the fed x holds
    values beyond it, so the clamp is exercised and a path that ignores the static scale
    (computing a dynamic one) gets other codes.
    """
    scheme = get_scheme(scheme_name)
    m, n, k = shape
    base = f"{golden_entry(scheme.input_seed_name)}/{shape_id(shape)}"  # modes share inputs
    x = scaled_normal(f"{base}/x", m, k, scheme.activation)
    act = scheme.activation
    calibration = x
    if act is not None and not act.dynamic:
        scale = static_scale_for(x, act)
        x = plant_corners(x, act, f"{base}/x", static_scale=scale, beyond=True)
        calibration = calibration_batch(f"{base}/x", m, k, act, scale)
    elif act is not None:
        x = plant_corners(x, act, f"{base}/x")
    w = plant_corners(scaled_normal(f"{base}/w", n, k, scheme.weight), scheme.weight, f"{base}/w")
    return {
        "x": x,
        "w": normalize_output(x, w),
        "bias": bias_vector(f"{base}/bias", n),
        "calibration": calibration,
    }


def bf16_digest(t: torch.Tensor) -> torch.Tensor:
    """sha256 of a seeded input's bf16 bytes, uint8 [32]: pins the regenerated float
    activation or weight in the golden without storing it (the codes and scales, which are
    stored, are what paths use)."""
    return tensor_digest(t.detach().to("cpu", torch.bfloat16))


def activation_view(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x`` with the same values laid out as ``layout`` says (see ACTIVATION_LAYOUTS)."""
    if layout == "transposed":
        return x.t().contiguous().t()
    if layout == "strided":
        return torch.stack([x, -x], dim=-1).flatten(-2)[:, ::2]
    if layout == "contiguous":
        return x.contiguous()
    raise ValueError(f"unknown activation layout {layout!r}")


def build_linear_golden(scheme_name: str) -> GoldenData:
    scheme = get_scheme(scheme_name)
    data = GoldenData()
    for shape in LINEAR_SHAPES:
        key = shape_id(shape)
        inputs = linear_inputs(scheme_name, shape)
        layer = quantize_linear(
            inputs["w"], inputs["bias"], scheme, calibration=inputs["calibration"]
        )
        xq = quantize_activation(inputs["x"], scheme, layer.input_scale)
        data.exact[f"{key}.x_sha256"] = bf16_digest(inputs["x"])
        data.exact[f"{key}.bias"] = inputs["bias"].to(torch.bfloat16)
        data.exact[f"{key}.w_sha256"] = bf16_digest(inputs["w"])
        data.exact[f"{key}.w_codes"] = layer.weight.codes
        data.exact[f"{key}.w_scale"] = stored_scale(layer.weight.scale, scheme.weight)
        if layer.weight.global_scale is not None:  # a two-level format's per-tensor level
            data.exact[f"{key}.w_global_scale"] = layer.weight.global_scale
        if layer.input_scale is not None and scheme.activation is not None:
            data.exact[f"{key}.input_scale"] = stored_static_scale(
                layer.input_scale, scheme.activation
            )
        a = inputs["x"].double()
        if xq is not None:
            data.exact[f"{key}.x_codes"] = xq.codes
            data.exact[f"{key}.x_scale"] = stored_scale(xq.scale, xq.spec)
            if xq.global_scale is not None:
                data.exact[f"{key}.x_global_scale"] = xq.global_scale
            a = xq.dequantize(torch.float64)
        # Reference without bias: float64 product of the exact dequantized operands.
        y = a @ layer.weight.dequantize(torch.float64).t()
        data.reference[f"{key}.y_ref"] = y.float()
    return data


register_each(build_linear_golden, ((golden_entry(n), (n,)) for n in sorted(SCHEMES)))


# ------------------------------------------------------------- loading from a golden
@dataclass
class LoadedLinearCase:
    """A golden linear case as tensors: the layer (checkpoint) and the input."""

    layer: QuantizedLinear
    x: torch.Tensor
    y_ref: torch.Tensor  # float64-derived reference without bias (float32)
    inputs: dict[str, torch.Tensor]


def golden_inputs(
    data: GoldenData, scheme_name: str, shape: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(w [N,K] float32, x [M,K] bfloat16) of one shape, regenerated from their seeds; a
    GoldenError unless they hash to the golden's ``w_sha256`` and ``x_sha256``."""
    inputs = linear_inputs(scheme_name, shape)
    entry, key = golden_entry(scheme_name), shape_id(shape)
    regenerated(entry, f"{key}.w", inputs["w"].to(torch.bfloat16), data)
    return inputs["w"], regenerated(entry, f"{key}.x", inputs["x"].to(torch.bfloat16), data)


def load_linear_case(
    data: GoldenData, scheme_name: str, shape: tuple[int, int, int], bias: bool
) -> LoadedLinearCase:
    scheme = get_scheme(scheme_name)
    key = shape_id(shape)
    t = data.tensors
    w_scale = scale_from_stored(t[f"{key}.w_scale"], scheme.weight)
    weight = QuantizedTensor(
        t[f"{key}.w_codes"], w_scale, scheme.weight, t.get(f"{key}.w_global_scale")
    )
    input_scale = None
    if f"{key}.input_scale" in t and scheme.activation is not None:
        input_scale = static_scale_from_stored(t[f"{key}.input_scale"], scheme.activation)
    layer = QuantizedLinear(scheme, weight, input_scale, t[f"{key}.bias"].float() if bias else None)
    w, x = golden_inputs(data, scheme_name, shape)
    x = activation_view(x.float(), ACTIVATION_LAYOUTS[shape])
    inputs = {"x": x, "w": w, "bias": t[f"{key}.bias"].float()}
    return LoadedLinearCase(layer, x, t[f"{key}.y_ref"], inputs)
