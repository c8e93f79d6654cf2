"""MoE blocks: every scheme x path x tokens x (experts, top-k) x renormalize, vs the goldens.

Each stage is checked where it can be checked honestly (bounds: harness/moe/bounds.py):
routing bit-exact; the intermediate before quantization within its derived bound; the
intermediate codes exactly what quantizing it gives; codes that differ from the golden's
only where the bound straddles a rounding boundary; the output within its bound of the
float64 result from the path's own intermediate; each grouped GEMM's output inside the
rounded interval of its own operands and, against the emulated path on rows with identical
operands, bit-identical wherever the bound fixes the rounded value (harness/moe/agreement.py).
Output vs golden and vs emulated follow from the above by the triangle inequality, so they
are recorded, not gated.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from harness.core.compare import bit_mismatches, sqnr_db, unit_roundoff, within_bound
from harness.core.formats import decode
from harness.core.quantize import calibrate_input_scale, quantize
from harness.core.schemes import SCHEMES, get_scheme
from harness.moe.agreement import gemm_agreement
from harness.moe.bounds import intermediate_bound, intermediate_delta, output_bound
from harness.moe.cases import (
    EXPERT_CONFIGS,
    MOE_HIDDEN,
    MOE_INTERMEDIATE,
    RENORMALIZE,
    SEEDED_WEIGHTS,
    TOKEN_COUNTS,
    MoECase,
    config_id,
    golden_entry,
    input_digest,
    load_moe_case,
    moe_cases,
    moe_inputs,
    renorm_id,
)
from harness.moe.dispatch import dispatch_problems, platform_key
from harness.moe.model import (
    MoELayer,
    MoETrace,
    Routing,
    down_and_combine_f64,
    quantize_experts,
    quantize_operand,
    route,
    silu_and_mul,
)
from harness.moe.paths import MoEProblem, get_moe_path, moe_paths
from harness.moe.paths.kernels import MOE_KERNELS
from harness.moe.paths.native import NativeMoEPath
from harness.platform import capabilities
from harness.store.golden import GoldenError

U32 = unit_roundoff(torch.float32)


def _golden(golden_store: Any, entry: str) -> Any:
    try:
        return golden_store.load(entry)
    except GoldenError as exc:
        pytest.fail(str(exc), pytrace=False)


# ------------------------------------------------------------------ dispatch table
def test_moe_dispatch_table_is_consistent() -> None:
    """Every registered scheme has one decision per row; every name is registered; every
    kernel decision is one the kernel's contract accepts."""
    problems = dispatch_problems(SCHEMES, MOE_KERNELS)
    assert not problems, "MoE dispatch table:\n  " + "\n  ".join(problems)


def _paths_with_dispatch_tables() -> list[str]:
    return [n for n, p in moe_paths().items() if hasattr(p, "table") and hasattr(p, "kernels")]


@pytest.mark.parametrize("path", _paths_with_dispatch_tables())
def test_moe_path_dispatch_table_is_consistent(path: str) -> None:
    """The same checks for the table and kernels of every registered MoE path that
    dispatches by table: a decision its kernel refuses would only ever show as a skip."""
    moe_path: Any = get_moe_path(path)
    problems = dispatch_problems(SCHEMES, moe_path.kernels, moe_path.table)
    assert not problems, f"MoE path {path!r} dispatch table:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_moe_native_decision_runs_where_probed(scheme: str, qh_platform: Any) -> None:
    """A native decision whose kernel the probe finds here must run every suite problem
    (no silent skip), and a kernel this arch is expected to have must be found."""
    native = NativeMoEPath()
    kernel, reason = native.kernel_for(get_scheme(scheme), qh_platform)
    if kernel is None:
        pytest.skip(reason)
    cap = kernel.capability(get_scheme(scheme))
    if cap in capabilities.expected(qh_platform):
        assert capabilities.has(qh_platform, cap), capabilities.why_not(qh_platform, cap)
    if not capabilities.has(qh_platform, cap):
        pytest.skip(capabilities.why_not(qh_platform, cap))
    for experts, top_k in EXPERT_CONFIGS:
        for tokens in TOKEN_COUNTS:
            problem = MoEProblem(tokens, experts, top_k, MOE_HIDDEN, MOE_INTERMEDIATE)
            support = native.supports(get_scheme(scheme), problem, qh_platform)
            assert support.ok, f"{platform_key(qh_platform)} {kernel.name}: {support.reason}"


# -------------------------------------------------------------- checkpoint, routing
@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_moe_checkpoint_and_routing_match_golden(
    scheme: str, golden_store: Any, qh_platform: Any
) -> None:
    """The seeded inputs are those the golden was built from; then expert weights quantized
    on this device, static scales and the routing of all 64 tokens reproduce it bit for bit."""
    spec = get_scheme(scheme)
    data = _golden(golden_store, golden_entry(scheme))
    t = data.tensors
    inputs = moe_inputs(scheme)
    # Inputs first, so a changed generator is never blamed on the quantizer.
    regenerated = {
        "x": bit_mismatches(inputs["x"].to(torch.bfloat16), t["x"]),
        "logits": bit_mismatches(inputs["logits"].to(torch.bfloat16), t["logits"]),
        **{n: bit_mismatches(input_digest(inputs[n]), t[f"{n}_sha256"]) for n in SEEDED_WEIGHTS},
    }
    changed = sorted(name for name, bad in regenerated.items() if bad)
    if changed:
        pytest.fail(
            f"seeded inputs changed: regenerated {changed} differ from the inputs golden "
            f"{golden_entry(scheme)!r} was built from (torch RNG or harness.core.inputs changed?); "
            "if intended, refresh: python -m harness golden refresh --only 'moe/*'",
            pytrace=False,
        )
    device = qh_platform.torch_device
    for name in SEEDED_WEIGHTS:
        q = quantize_experts(inputs[name].to(device), spec.weight)
        assert bit_mismatches(q.codes.cpu(), t[f"{name}_codes"]) == 0, f"{name} codes differ"
        assert bit_mismatches(q.scale.cpu(), t[f"{name}_scale"]) == 0, f"{name} scales differ"
    if spec.activation is not None and not spec.activation.dynamic:
        a1 = calibrate_input_scale(inputs["x"].to(device), spec.activation)
        assert bit_mismatches(a1.cpu(), t["a1_scale"]) == 0, "static input scale differs"
    logits = t["logits"].float().to(device)
    for experts, top_k in EXPERT_CONFIGS:
        cfg = config_id(experts, top_k)
        for renormalize in RENORMALIZE:
            r = route(logits[:, :experts], top_k, renormalize)
            assert bit_mismatches(r.ids.cpu().to(torch.int32), t[f"{cfg}.ids"]) == 0, cfg
            weights = t[f"{cfg}.{renorm_id(renormalize)}.weights"]
            assert bit_mismatches(r.weights.cpu(), weights) == 0, f"{cfg} weights"


# ----------------------------------------------------------------------- the block
def _run(
    path_name: str, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: Any
) -> MoETrace:
    try:
        return get_moe_path(path_name).forward(layer, x, routing, platform)
    except Exception as exc:
        pytest.fail(f"MoE path {path_name!r} raised: {type(exc).__name__}: {exc}", pytrace=False)


def _intermediate_values(trace: MoETrace) -> torch.Tensor:
    """What the path fed to its second GEMM: dequantized codes, or the float intermediate."""
    return trace.act.cpu() if trace.act_q is None else trace.act_q.to("cpu").dequantize()


@functools.cache
def _unquantized_output(
    scheme: str, experts: int, top_k: int, tokens: int, renorm: bool
) -> torch.Tensor:
    """Float64 output of the unquantized block (for the SQNR metric only)."""
    inputs = moe_inputs(scheme)
    x = inputs["x"][:tokens].double()
    routing = route(inputs["logits"][:tokens, :experts], top_k, renorm)
    w13 = inputs["w13"][:experts].double()[routing.row_experts()]
    gate_up = torch.einsum("rk,rnk->rn", x[routing.row_tokens()], w13)
    g, u = gate_up.chunk(2, dim=-1)
    return down_and_combine_f64(g * torch.sigmoid(g) * u, inputs["w2"][:experts], routing)


def _kernel_name(path: Any, scheme: Any, platform: Any) -> str:
    """What runs for this path and scheme here (a path may say; else its own name)."""
    kernel_name = getattr(path, "kernel_name", None)
    return str(kernel_name(scheme, platform)) if kernel_name is not None else str(path.name)


@pytest.mark.parametrize("case", list(moe_cases()), ids=lambda c: c.id)
def test_moe(case: MoECase, golden_store: Any, qh_platform: Any, record_result: Any) -> None:
    scheme = get_scheme(case.scheme)
    path = get_moe_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    numerics = path.numerics(scheme, qh_platform)
    record_result(kernel=_kernel_name(path, scheme, qh_platform), numerics=numerics.describe())
    loaded = load_moe_case(_golden(golden_store, golden_entry(case.scheme)), case)
    device = qh_platform.torch_device
    layer = loaded.layer

    # Routing on this device: indices and weights bit-exact.
    routing = route(loaded.logits.to(device), case.top_k, case.renormalize)
    assert bit_mismatches(routing.ids.cpu(), loaded.ids) == 0, "routing indices differ"
    assert bit_mismatches(routing.weights.cpu(), loaded.weights) == 0, "routing weights differ"

    trace = _run(case.path, layer.to(device), loaded.x.to(device), routing, qh_platform)
    out, act = trace.out.cpu(), trace.act.cpu()
    assert out.shape == (case.tokens, MOE_HIDDEN), f"output shape {tuple(out.shape)}"
    assert act.shape == loaded.act_ref.shape, f"intermediate shape {tuple(act.shape)}"
    assert bool(torch.isfinite(out).all()), (
        f"{int((~torch.isfinite(out)).sum())} non-finite outputs"
    )
    assert bool(torch.isfinite(act).all()), "non-finite intermediate values"
    routing = Routing(routing.ids.cpu(), routing.weights.cpu(), routing.num_experts)

    # 1. Intermediate before quantization: derived bound, plus the golden's float32 storage.
    act_bound = intermediate_bound(layer, loaded.x, routing, numerics)
    act_bound = act_bound + U32 * loaded.act_ref.double().abs()
    vs_act = within_bound(act, loaded.act_ref, act_bound)
    record_result(act_worst_error_to_bound=vs_act.worst_ratio)
    assert vs_act.ok, f"intermediate vs golden: {vs_act.describe()}"
    if trace.gate_up is not None:
        # The intermediate is SiLU(g) * u of the path's own GEMM-1 output in float32: two
        # float32 implementations of x * sigmoid(x) (exp, add, divide, multiply) each err by
        # a few u32, so 16 u32 relative; a reduced-precision activation errs by ~2^-9.
        own_act = silu_and_mul(trace.gate_up.cpu().float())
        vs_silu = within_bound(act, own_act, 16 * U32 * own_act.double().abs())
        assert vs_silu.ok, (
            f"intermediate is not SiLU-and-mul of its own gate_up in float32: {vs_silu.describe()}"
        )

    # 2. Intermediate codes: exactly the scheme's quantization of the path's intermediate,
    #    and different from the golden's codes only where the bound straddles a boundary.
    spec = scheme.activation
    if spec is not None:
        assert trace.act_q is not None, f"{case.path} returned no quantized intermediate"
        assert loaded.act_q is not None, "golden has no intermediate codes"
        act_q = trace.act_q.to("cpu")
        record_result(
            intermediate_code_flips_vs_golden=int((act_q.codes != loaded.act_q.codes).sum())
        )
        static = None if spec.dynamic else layer.a2_scale
        expected = quantize(act, spec, static)
        assert bit_mismatches(act_q.scale, expected.scale) == 0, "intermediate scales"
        assert bit_mismatches(act_q.codes, expected.codes) == 0, "intermediate codes"
        ref = loaded.act_ref.double()
        lo = quantize(
            torch.nextafter((ref - act_bound).float(), torch.tensor(-torch.inf)), spec, act_q.scale
        )
        hi = quantize(
            torch.nextafter((ref + act_bound).float(), torch.tensor(torch.inf)), spec, act_q.scale
        )
        value = decode(act_q.codes, spec.format)
        outside = (value < decode(lo.codes, spec.format)) | (value > decode(hi.codes, spec.format))
        assert not bool(outside.any()), (
            f"{int(outside.sum())} intermediate codes outside what the bound allows"
        )
        golden_a2 = loaded.act_q.dequantize().double()
        storage = torch.zeros(1, dtype=torch.float64)
    else:
        golden_a2 = loaded.act_ref.double()
        storage = U32 * golden_a2.abs()  # golden intermediate stored in float32
    own_a2 = _intermediate_values(trace)

    # 3. Output vs float64 from the path's own intermediate: derived bound.
    out_bound = output_bound(layer, own_a2, routing, numerics)
    own_ref = down_and_combine_f64(own_a2, layer.w2.dequantize(), routing)
    vs_own = within_bound(out, own_ref, out_bound)
    record_result(worst_error_to_bound=vs_own.worst_ratio)
    assert vs_own.ok, f"output vs float64 from its own intermediate: {vs_own.describe()}"

    # Output vs golden: check 3 plus the exact effect of the intermediate difference and the
    # golden's float32 storage (triangle inequality), so it cannot fail on its own: recorded.
    w2 = layer.w2.dequantize()
    delta = intermediate_delta(own_a2, golden_a2, w2, routing.ids, routing.weights)
    delta = delta + intermediate_delta(
        storage.expand_as(golden_a2), torch.zeros_like(golden_a2), w2, routing.ids, routing.weights
    )
    golden_bound = out_bound + delta + U32 * loaded.out_ref.double().abs()
    vs_golden = within_bound(out, loaded.out_ref, golden_bound)
    record_result(
        max_abs_err_vs_golden=vs_golden.max_abs_error,
        worst_error_to_bound_vs_golden=vs_golden.worst_ratio,
    )

    # 4. Each grouped GEMM's output, element by element (harness/moe/agreement.py): inside
    #    the rounded interval of its own operands, and, against the reference path on rows
    #    where both multiply identical operands, bit-identical wherever the bound fixes the
    #    rounded value.
    ref_trace, ref_a2, ref_numerics = None, own_a2, numerics
    if not getattr(path, "is_reference", False):
        emulated = get_moe_path("emulated")
        ref_numerics = emulated.numerics(scheme, qh_platform)
        ref_trace = _run("emulated", layer, loaded.x, routing, qh_platform)
        ref_a2 = _intermediate_values(ref_trace)
        both = (
            out_bound
            + output_bound(layer, ref_a2, routing, ref_numerics)
            + intermediate_delta(own_a2, ref_a2, w2, routing.ids, routing.weights)
        )
        # Implied by check 3 for both paths (triangle inequality): recorded, not gated.
        vs_emulated = within_bound(out, ref_trace.out.cpu(), both)
        record_result(worst_error_to_bound_vs_emulated=vs_emulated.worst_ratio)
    a1 = quantize_operand(loaded.x, scheme.activation, layer.a1_scale).values
    a1 = a1[routing.row_tokens()]  # every path quantizes x the same way (bit-exact)
    w13 = layer.w13.dequantize()
    gemms = (  # name, this path's output and left operand, the reference's, the weights
        ("gemm1", trace.gate_up, a1, None if ref_trace is None else ref_trace.gate_up, a1, w13),
        ("gemm2", trace.y, own_a2, None if ref_trace is None else ref_trace.y, ref_a2, w2),
    )
    for gemm, y, a, ref_y, ref_a, w in gemms:
        if y is None or (ref_trace is not None and ref_y is None):
            pytest.fail(
                f"MoE path {case.path!r} (or emulated) returned a MoETrace without the {gemm} "
                "output (gate_up / y); run_moe fills them, see docs/MOE.md",
                pytrace=False,
            )
        reference = None if ref_y is None else (ref_y.cpu(), ref_a, ref_numerics)
        found = gemm_agreement(y.cpu(), a, w, routing.row_experts(), numerics, reference)
        record_result(
            **{
                f"{gemm}_outside_own_interval": found.outside_own,
                f"{gemm}_comparable_vs_emulated": found.comparable,
                f"{gemm}_determined_vs_emulated": found.determined,
                f"{gemm}_mismatched_vs_emulated": found.mismatched,
            }
        )
        assert found.ok, f"{gemm} of {case.path}: {found.describe()}"

    exact = _unquantized_output(
        case.scheme, case.experts, case.top_k, case.tokens, case.renormalize
    )
    record_result(sqnr_db=sqnr_db(exact, out))  # reported, not gated


def test_moe_cases_cover_every_scheme_and_path() -> None:
    """The grid is what the docs promise: 3 token counts x 2 configs x 2 renormalize."""
    cases = list(moe_cases())
    assert {c.scheme for c in cases} == set(SCHEMES)
    per = len(TOKEN_COUNTS) * len(EXPERT_CONFIGS) * len(RENORMALIZE)
    assert len(cases) == len(SCHEMES) * len({c.path for c in cases}) * per
