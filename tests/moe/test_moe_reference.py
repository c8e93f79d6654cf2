"""The MoE reference: routing, the pipeline on block/MX-like specs, grouped-op contracts."""

from __future__ import annotations

import pytest
import torch
from moe_helpers import TILE_KINDS, W_MXFP4_A_MXFP6, small_moe

from harness.core.compare import unit_roundoff, within_bound
from harness.core.quantize import quantize
from harness.core.schemes import QuantSpec, Scheme
from harness.moe.bounds import SILU_LIPSCHITZ, intermediate_bound, output_bound
from harness.moe.model import (
    Operand,
    down_and_combine_f64,
    gather_rows,
    quantize_operand,
    reference_moe,
    route,
)
from harness.moe.paths import MoEProblem, get_moe_path
from harness.ops.grouped import group_offsets, grouped_mm_bf16
from harness.platform.info import detect

U32 = unit_roundoff(torch.float32)


# --------------------------------------------------------------------------- routing
def test_ties_go_to_the_lowest_expert_index() -> None:
    logits = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0], [0.5, 0.5, 0.5, 0.5, 0.5]])
    r = route(logits, 2, renormalize=False)
    assert r.ids.tolist() == [[1, 2], [0, 1]]
    r4 = route(logits, 4, renormalize=False)
    assert r4.ids.tolist() == [[1, 2, 4, 3], [0, 1, 2, 3]]


def test_weights_are_float64_softmax_rounded_once() -> None:
    logits = torch.tensor([[0.25, -1.0, 2.0, 0.5]])
    expected = torch.softmax(logits.double(), dim=1)[:, [2, 3]]
    r = route(logits, 2, renormalize=False)
    assert torch.equal(r.weights, expected.float())
    rn = route(logits, 2, renormalize=True)
    assert torch.equal(rn.weights, (expected / expected.sum()).float())
    assert abs(float(rn.weights.double().sum()) - 1.0) <= 2 * U32


def test_bad_router_logits_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN or Inf"):
        route(torch.tensor([[0.0, float("nan")]]), 1, False)
    with pytest.raises(ValueError, match=r"top_k=3 must be in 1\.\.2"):
        route(torch.zeros(1, 2), 3, False)


def test_tokens_per_expert_counts_empty_experts() -> None:
    r = route(torch.tensor([[0.0, 1.0, 2.0, -5.0]] * 3), 2, False)
    assert r.tokens_per_expert().tolist() == [0, 3, 3, 0]


# ----------------------------------------------------------------- the pipeline
@pytest.mark.parametrize("path", ["emulated", "native"])
@pytest.mark.parametrize("scheme", TILE_KINDS, ids=lambda s: s.name)
def test_block_and_mx_like_specs_match_float64_reference(scheme: Scheme, path: str) -> None:
    """MX, per-channel, per-block and static schemes through both paths at a second size
    (H = 64, 4 experts): the same stage checks as the suite, against `reference_moe`."""
    platform = detect()
    moe_path = get_moe_path(path)
    support = moe_path.supports(scheme, MoEProblem(9, 4, 2, 64, 32), platform)
    if not support.ok:
        pytest.skip(support.reason)
    layer, x, logits = small_moe(scheme)
    routing = route(logits, 2, renormalize=True)
    numerics = moe_path.numerics(scheme, platform)
    trace = moe_path.forward(layer, x, routing, platform)
    ref = reference_moe(layer, x, routing)

    act_bound = intermediate_bound(layer, x, routing, numerics)
    vs_act = within_bound(trace.act, ref.act, act_bound)
    assert vs_act.ok, vs_act.describe()

    a2 = trace.act if trace.act_q is None else trace.act_q.dequantize()
    if scheme.activation is not None:
        assert trace.act_q is not None
        static = None if scheme.activation.dynamic else layer.a2_scale
        again = quantize(trace.act, scheme.activation, static)
        assert torch.equal(trace.act_q.codes, again.codes)
        assert torch.equal(trace.act_q.scale, again.scale)
    own = down_and_combine_f64(a2, layer.w2.dequantize(), routing)
    vs_own = within_bound(trace.out, own, output_bound(layer, a2, routing, numerics))
    assert vs_own.ok, vs_own.describe()


def test_reference_output_comes_from_the_quantized_intermediate() -> None:
    """Moving one intermediate code moves the float64 reference output (no hidden re-use
    of the unquantized intermediate)."""
    scheme = W_MXFP4_A_MXFP6  # MX weights and activations
    layer, x, logits = small_moe(scheme)
    routing = route(logits, 2, renormalize=False)
    ref = reference_moe(layer, x, routing)
    assert ref.act_q is not None
    a2 = ref.act_q.dequantize().double()
    assert torch.equal(ref.out, down_and_combine_f64(a2, layer.w2.dequantize(), routing))
    unquantized = down_and_combine_f64(ref.act, layer.w2.dequantize(), routing)
    assert not torch.equal(ref.out, unquantized)


def test_gather_rows_keeps_per_row_scales_and_refuses_multi_row_tiles() -> None:
    x = torch.arange(1.0, 65.0).reshape(2, 32)
    per_row = quantize_operand(x, QuantSpec("e4m3fn", block=(1, None), dynamic=True), None)
    picked = gather_rows(per_row, torch.tensor([1, 1, 0]))
    assert picked.quantized is not None
    assert per_row.quantized is not None
    assert torch.equal(picked.quantized.scale, per_row.quantized.scale[[1, 1, 0]])
    tiles = quantize_operand(x, QuantSpec("e4m3fn", block=(2, 32), dynamic=True), None)
    with pytest.raises(ValueError, match="tiles of 2 rows cannot be gathered"):
        gather_rows(tiles, torch.tensor([0]))
    assert isinstance(gather_rows(Operand(x, None), torch.tensor([0])).values, torch.Tensor)


# --------------------------------------------------------------------- contracts
def test_grouped_mm_offsets_contract_with_empty_groups() -> None:
    """torch 2.13 grouped_mm: int32 cumulative offsets; an empty group is a repeated one."""
    counts = torch.tensor([3, 0, 5, 2])
    assert group_offsets(counts).tolist() == [3, 3, 8, 10]
    assert group_offsets(counts).dtype == torch.int32
    a = (torch.arange(10 * 16).reshape(10, 16) % 7 - 3).to(torch.bfloat16)
    w = (torch.arange(4 * 8 * 16).reshape(4, 8, 16) % 5 - 2).to(torch.bfloat16)
    out = grouped_mm_bf16(a, w, counts)
    groups = torch.repeat_interleave(torch.arange(4), counts)
    expected = torch.stack([a[r].float() @ w[groups[r]].float().t() for r in range(10)])
    assert torch.equal(out.float(), expected)  # small integers: exact
    with pytest.raises(ValueError, match="group counts sum to 9"):
        grouped_mm_bf16(a, w, torch.tensor([3, 0, 4, 2]))


def test_silu_lipschitz_constant_bounds_the_derivative() -> None:
    x = torch.linspace(-30, 30, 600_001, dtype=torch.float64)
    s = torch.sigmoid(x)
    derivative = s * (1 + x * (1 - s))
    assert float(derivative.abs().max()) <= SILU_LIPSCHITZ
    assert float(derivative.abs().max()) > SILU_LIPSCHITZ - 1e-4  # and is not loose
