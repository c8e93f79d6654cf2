"""Special values: NaN and +-Inf in the activation, and what every path must make of them.

A case family of its own (`suites/test_special_values.py`), kept apart from the numeric
suites, where NaN never passes. One activation element (row `SPECIAL_ROW`, column
`SPECIAL_COL`) is NaN, +Inf or -Inf; the other rows are ordinary. What the output must hold
follows from the scheme's activation spec, by rule (`expected_special_row`), as the
reference defines it:

- MX (E8M0 scales): a block holding NaN or Inf gets the NaN scale, code 0xFF (OCP MX spec),
  so every element of the block, and every output of that row, is NaN. NVFP4's E4M3 block
  scales follow the same rule (`ScaleFormat.nan_for_nonfinite_block`; its static per-tensor
  level, calibrated on clean data, keeps the other rows as they were).
- FP32 dynamic scales (per token, 1x128 groups): the tile's amax is NaN or Inf, so is its
  scale, and every output of that row is NaN.
- FP32 static per-tensor scale: NaN encodes as the format's NaN code and propagates (the
  row is NaN); +-Inf saturates to +-qmax, so the row is finite and equals the output for
  the activation with +-qmax * scale in that place.
- Unquantized activations: NaN propagates (row NaN); +-Inf times each weight gives +-Inf by
  the weight's sign, NaN where the weight is zero.

A path whose activation quantizer declares a convention that saturates a block holding
+-Inf (`Convention.saturates_inf_block`: `e4m3_inf_block_scale_448`, vLLM's and torchao's
NVFP4) is held to that instead: +-Inf gives `ROW_SATURATED`, the saturated activation
holding +-float32 max in that place. Both saturate the block alike: its scale quotient
(at least fmax / 6 / global, the global at most fmax / 2688) exceeds E4M3's 448, and
+-fmax times any finite positive multiplier clamps to the element max, as +-Inf does.

Every other row must be bit-identical to the same path's output on the clean activation:
a special value stays in its row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.conventions import saturates_inf_block, with_conventions
from harness.core.inputs import bias_vector, calibration_batch, scaled_normal, static_scale_for
from harness.core.quantize import QuantizedLinear, quantize_linear
from harness.core.schemes import SCHEMES, Scheme, get_scheme
from harness.linear.paths import linear_paths
from harness.paths import LinearProblem
from harness.paths.case import Case

SPECIAL_SHAPE = (4, 128, 256)  # M x N x K: whole 128-blocks, so every native kernel may run
SPECIAL_ROW = 1
SPECIAL_COL = 5  # inside the first MX block and the first 128-group of the row
SPECIAL_VALUES: dict[str, float] = {
    "nan": float("nan"),
    "pos_inf": float("inf"),
    "neg_inf": float("-inf"),
}
ROW_NAN = "row_nan"  # every output of the special row is NaN
ROW_SATURATED = "row_saturated"  # finite: the output for the saturated activation
ROW_SIGNED_INF = "row_signed_inf"  # +-Inf by the weight's sign, NaN where the weight is 0


@dataclass(frozen=True)
class SpecialCase(Case):
    SUITE = "special_values"
    ID = ("scheme", "path", "kind")
    RECORD = ("scheme", "path", "special=kind")
    FINDING_SUITE = "special_values"

    scheme: str
    path: str
    kind: str  # a key of SPECIAL_VALUES

    @property
    def problem(self) -> LinearProblem:
        m, n, k = SPECIAL_SHAPE
        return LinearProblem(m, n, k, True, torch.float32)

    @property
    def finding_case_name(self) -> str:
        return self.kind


def special_cases() -> Iterator[SpecialCase]:
    for scheme in sorted(SCHEMES):
        for path in linear_paths():
            for kind in SPECIAL_VALUES:
                yield SpecialCase(scheme, path, kind)


def expected_special_row(scheme: Scheme, kind: str) -> str:
    """What the special row of the output must be, from the activation spec (see above)."""
    act = scheme.activation
    if act is None:
        return ROW_NAN if kind == "nan" else ROW_SIGNED_INF
    if kind != "nan" and saturates_inf_block(act):  # a declared convention (module doc)
        return ROW_SATURATED
    if act.scale_fmt.nan_for_nonfinite_block or act.dynamic:
        return ROW_NAN
    return ROW_NAN if kind == "nan" else ROW_SATURATED


@dataclass
class SpecialInputs:
    layer: QuantizedLinear
    clean: torch.Tensor  # float32 [M, K], no special value
    special: torch.Tensor  # clean with SPECIAL_VALUES[kind] at (SPECIAL_ROW, SPECIAL_COL)
    saturated: torch.Tensor | None  # clean with +-qmax * static scale there (static specs)


def special_inputs(
    scheme_name: str, kind: str, conventions: frozenset[str] = frozenset()
) -> SpecialInputs:
    """Seeded layer and activations for one scheme and special value; ``conventions``: the
    path's activation conventions (the saturated activation follows them, module doc)."""
    scheme = get_scheme(scheme_name)
    m, n, k = SPECIAL_SHAPE
    base = f"special/{scheme_name}"
    x = scaled_normal(f"{base}/x", m, k, scheme.activation)
    w = scaled_normal(f"{base}/w", n, k, scheme.weight)
    act = scheme.activation
    calibration = x
    if act is not None and not act.dynamic:
        calibration = calibration_batch(f"{base}/x", m, k, act, static_scale_for(x, act))
    layer = quantize_linear(w, bias_vector(f"{base}/bias", n), scheme, calibration=calibration)
    special = x.clone()
    special[SPECIAL_ROW, SPECIAL_COL] = SPECIAL_VALUES[kind]
    saturated = None
    if layer.input_scale is not None and act is not None and kind != "nan":
        saturated = x.clone()
        bound = act.qmax * float(layer.input_scale.reshape(()))
        if saturates_inf_block(with_conventions(act, conventions)):
            bound = torch.finfo(torch.float32).max  # saturates as Inf does (module doc)
        saturated[SPECIAL_ROW, SPECIAL_COL] = bound if kind == "pos_inf" else -bound
    return SpecialInputs(layer, x, special, saturated)
