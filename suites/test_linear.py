"""Linear layers: every scheme x path x shape x bias x output dtype, against the goldens."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from harness.core.compare import (
    bit_mismatches,
    cancellation_db,
    dot_error_bound,
    outside_interval,
    rounding_bound,
    rounding_interval,
    sqnr_db,
    within_bound,
)
from harness.core.quantize import quantize, quantize_activation, stored_scale
from harness.core.schemes import get_scheme
from harness.linear.cases import (
    LinearCase,
    QuantizeCase,
    linear_cases,
    load_linear_case,
    quantize_cases,
)
from harness.linear.repro import linear_bundle_tensors
from harness.paths import get_path
from harness.paths.base import is_reference, output_roundings
from harness.store.golden import GoldenError


def _golden(golden_store: Any, entry: str) -> Any:
    try:
        return golden_store.load(entry)
    except GoldenError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.mark.parametrize("case", list(quantize_cases()), ids=lambda c: c.id)
def test_quantize_matches_golden(
    case: QuantizeCase, golden_store: Any, qh_platform: Any, measure_memory: Any
) -> None:
    """The reference quantizer reproduces the golden codes and scales bit for bit, on device."""
    scheme = get_scheme(case.scheme)
    data = _golden(golden_store, f"linear/{case.scheme}")
    loaded = load_linear_case(data, case.scheme, case.shape, bias=True)
    device = qh_platform.torch_device
    w_in = loaded.inputs["w"].to(device)
    with measure_memory():  # records peak_bytes of the reference quantizer
        w = quantize(w_in, scheme.weight)
    assert bit_mismatches(w.codes, loaded.layer.weight.codes) == 0, "weight codes differ"
    assert bit_mismatches(w.scale, loaded.layer.weight.scale) == 0, "weight scales differ"
    xq = quantize_activation(loaded.x.to(device), scheme, loaded.layer.input_scale)
    key = "x".join(map(str, case.shape))
    if xq is not None:
        assert bit_mismatches(xq.codes, data.tensors[f"{key}.x_codes"]) == 0, "activation codes"
        stored = stored_scale(xq.scale, xq.spec)  # E8M0 codes for MX, float32 otherwise
        assert bit_mismatches(stored, data.tensors[f"{key}.x_scale"]) == 0, "activation scales"


def _run(case: LinearCase, layer: Any, x: torch.Tensor, path_name: str) -> torch.Tensor:
    path = get_path(path_name)
    dtype = case.problem.out_dtype
    try:
        y = path.forward(layer, x, dtype)
    except Exception as exc:
        pytest.fail(
            f"path {path_name!r} raised on {case.id}: {type(exc).__name__}: {exc}", pytrace=False
        )
    if y.shape != (case.shape[0], case.shape[1]) or y.dtype != dtype:
        pytest.fail(
            f"path {path_name!r} returned {tuple(y.shape)} {y.dtype}, "
            f"expected {(case.shape[0], case.shape[1])} {dtype}",
            pytrace=False,
        )
    return y


@pytest.mark.parametrize("case", list(linear_cases()), ids=lambda c: c.id)
def test_linear(
    case: LinearCase,
    golden_store: Any,
    qh_platform: Any,
    record_result: Any,
    measure_memory: Any,
    repro_case: Any,
) -> None:
    scheme = get_scheme(case.scheme)
    support = get_path(case.path).supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    data = _golden(golden_store, f"linear/{case.scheme}")
    loaded = load_linear_case(data, case.scheme, case.shape, case.bias)
    device = qh_platform.torch_device
    layer, x = loaded.layer.to(device), loaded.x.to(device)
    out_dtype = case.problem.out_dtype
    k = case.shape[2]

    with measure_memory():  # records peak_bytes of the path's forward call
        y = _run(case, layer, x, case.path)
    y = y.cpu()
    assert bool(torch.isfinite(y).all()), f"{int((~torch.isfinite(y)).sum())} non-finite outputs"

    # Reference: golden float64 product of the dequantized operands, plus the bias; the
    # same product recomputed here in float64 is the center of the bit-exact interval.
    bias = loaded.inputs["bias"].double() if case.bias else torch.zeros(case.shape[1]).double()
    reference = loaded.y_ref.double() + bias
    xq = quantize_activation(loaded.x, scheme, loaded.layer.input_scale)
    a = loaded.x.double() if xq is None else xq.dequantize(torch.float64)
    w = loaded.layer.weight.dequantize(torch.float64)
    center = a @ w.t() + bias
    abs_product = a.abs() @ w.abs().t() + bias.abs()
    path = get_path(case.path)
    roundings = output_roundings(path, scheme, case.problem)

    # Accumulation radius: each of the K terms passes through at most K + 3 float32
    # roundings (two operand dequantizations or two scale multiplies, the product, K - 1
    # additions, the bias): Higham gamma_{K+3}; plus gamma_K in float64 for `center`.
    radius = dot_error_bound(abs_product, k + 2, torch.float32) + dot_error_bound(
        abs_product, k, torch.float64
    )
    # vs golden: the radius, the golden's float32 storage (u_f32 |y|), and the path's
    # roundings to the output dtype (u_out |y| each).
    bound = (
        radius
        + rounding_bound(reference, torch.float32)
        + rounding_bound(reference, out_dtype, roundings=roundings)
    )
    repro_case("linear", **linear_bundle_tensors(loaded.layer, loaded.x, y, reference, bound))
    vs_golden = within_bound(y, reference, bound)
    record_result(
        max_abs_err_vs_golden=vs_golden.max_abs_error, worst_error_to_bound=vs_golden.worst_ratio
    )
    assert vs_golden.ok, f"{case.path} vs golden reference: {vs_golden.describe()}"

    if roundings == 1:
        # Rounded once to nearest, the result must lie between the rounded ends of the
        # accumulation interval; where both ends round alike, it is determined bit for bit.
        lo, hi = rounding_interval(center, radius, out_dtype)
        outside = outside_interval(y, lo, hi)
        determined = lo == hi
        record_result(determined_fraction=float(determined.float().mean()))
        assert not bool(outside.any()), (
            f"{case.path}: {int(outside.sum())}/{y.numel()} outputs are not a rounding of any "
            f"value within the accumulation bound ({int((outside & determined).sum())} of "
            "them where the correctly rounded result is unique)"
        )

    if not is_reference(path):
        # Same quantized operands through the emulated path: where the rounded result is
        # unique the two must agree bit for bit; elsewhere both lie within the bound.
        y_emulated = get_path("emulated").forward(layer, x, out_dtype).cpu()
        if roundings == 1:
            differ = int(((y != y_emulated) & determined).sum())
            record_result(bit_differences_vs_emulated=differ)
            assert differ == 0, (
                f"{case.path} and emulated differ in {differ} outputs whose correctly rounded "
                "value is unique"
            )
        vs_emulated = within_bound(y, y_emulated, 2 * bound)
        record_result(worst_error_to_bound_vs_emulated=vs_emulated.worst_ratio)
        assert vs_emulated.ok, f"{case.path} vs emulated: {vs_emulated.describe()}"

    # Quantization quality: SQNR of the output vs the unquantized float64 product. The floor
    # bounds noise relative to the energy of the products; the exact sum's cancellation
    # (computed from the unquantized inputs) is added back before comparing with it.
    exact = loaded.x.double() @ loaded.inputs["w"].double().t() + bias
    sqnr = sqnr_db(exact, y)
    cancellation = cancellation_db(loaded.x, loaded.inputs["w"], bias if case.bias else None)
    term_sqnr = sqnr - cancellation
    record_result(sqnr_db=sqnr, term_sqnr_db=term_sqnr, sqnr_floor_db=scheme.sqnr_floor_db)
    assert term_sqnr >= scheme.sqnr_floor_db, (
        f"SQNR {sqnr:.1f} dB (+{-cancellation:.1f} dB cancellation of the exact sum = "
        f"{term_sqnr:.1f} dB) below the floor {scheme.sqnr_floor_db} dB for {case.scheme}"
    )
