"""Re-run a failing linear case from its repro bundle and give the same check's verdict.

The bundle (`harness.store.repro`) carries the loaded layer's quantized operands (weight
codes and scales, static input scale, bias), the input, the path's output, the float64
reference and the derived bound. Re-running rebuilds the layer from those tensors alone (no
golden store needed), runs the path on this machine and applies the suite's first check,
``within_bound(output, reference, bound)``: the output of the linear path must lie within
the bound of the golden reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.core.compare import within_bound
from harness.core.quantize import QuantizedLinear, QuantizedTensor
from harness.core.schemes import get_scheme
from harness.linear.cases import OUT_DTYPES
from harness.paths import get_path
from harness.platform.info import detect
from harness.store.repro import Bundle, ReproError


def linear_bundle_tensors(
    layer: QuantizedLinear,
    x: torch.Tensor,
    y: torch.Tensor,
    reference: torch.Tensor,
    bound: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The tensors a linear repro bundle holds (what `rerun_linear` needs)."""
    tensors = {
        "x": x,
        "w_codes": layer.weight.codes,
        "w_scale": layer.weight.scale,
        "y": y,
        "reference": reference,
        "bound": bound,
    }
    if layer.input_scale is not None:
        tensors["input_scale"] = layer.input_scale
    if layer.bias is not None:
        tensors["bias"] = layer.bias
    return tensors


@dataclass(frozen=True)
class ReproVerdict:
    path: str
    ok: bool
    description: str
    same_output: bool  # bit-identical to the output recorded in the bundle

    def text(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        same = "identical to" if self.same_output else "differs from"
        return (
            f"{verdict}: {self.path} vs golden reference: {self.description} "
            f"(output {same} the bundle's)"
        )


def rerun_linear(bundle: Bundle, path_name: str | None = None) -> ReproVerdict:
    case: dict[str, Any] = bundle.meta.get("case") or {}
    t = bundle.tensors
    try:
        scheme = get_scheme(str(case["scheme"]))
        out_dtype = OUT_DTYPES[str(case["out_dtype"])]
        path_name = path_name or str(case["path"])
        layer = QuantizedLinear(
            scheme,
            QuantizedTensor(t["w_codes"], t["w_scale"], scheme.weight),
            t.get("input_scale"),
            t.get("bias"),
        )
        x, reference, bound = t["x"], t["reference"], t["bound"]
    except KeyError as exc:
        raise ReproError(f"linear bundle lacks {exc}") from None
    path = get_path(path_name)
    device = detect().torch_device
    y = path.forward(layer.to(device), x.to(device), out_dtype).cpu()
    result = within_bound(y, reference, bound)
    recorded = t.get("y")
    same = recorded is not None and bool(torch.equal(y, recorded))
    return ReproVerdict(path_name, result.ok, result.describe(), same)
