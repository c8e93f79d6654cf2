"""MoE blocks: every scheme x path x tokens x (experts, top-k) x renormalize, vs the goldens.

The checks of one block, their order and what each one means: harness/moe/checks.py
(bounds: harness/moe/bounds.py, GEMM agreement: harness/moe/agreement.py).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from harness.core.compare import bit_mismatches, sqnr_db
from harness.core.quantize import calibrate_input_scale
from harness.core.schemes import get_scheme
from harness.moe.bias_cases import ExpertBiasCase, biased_case, expert_bias_cases
from harness.moe.cases import (
    EXPERT_CONFIGS,
    MOE_HIDDEN,
    MOE_INTERMEDIATE,
    RENORMALIZE,
    SEEDED_INPUTS,
    SEEDED_WEIGHTS,
    TOKEN_COUNTS,
    LoadedMoECase,
    MoECase,
    config_id,
    golden_entry,
    input_digest,
    load_moe_case,
    moe_cases,
    moe_inputs,
    renorm_id,
)
from harness.moe.checks import (
    ReferenceRun,
    moe_block_checks,
    recorded_metrics,
    routing_checks,
    shape_checks,
)
from harness.moe.designs import LONG_TOP_K, LongKMoECase, long_k_case, long_k_cases
from harness.moe.dispatch import MOE_SCHEMES, dispatch_problems
from harness.moe.model import (
    MoELayer,
    MoETrace,
    Routing,
    down_and_combine_f64,
    quantize_experts,
    route,
)
from harness.moe.paths import MoEProblem, get_moe_path, moe_paths
from harness.moe.paths.kernels import MOE_KERNELS
from harness.moe.paths.native import NativeMoEPath
from harness.paths.base import is_reference, kernel_name
from harness.platform import capabilities
from harness.platform.info import PlatformInfo, platform_key
from harness.plugin import RecordChecks, RecordResult, load_golden
from harness.store.golden_errors import refresh_command
from harness.store.golden_store import GoldenStore


# ------------------------------------------------------------------ dispatch table
def test_moe_dispatch_table_is_consistent() -> None:
    """Every registered scheme has one decision per row; every name is registered; every
    kernel decision is one the kernel's contract accepts."""
    problems = dispatch_problems(MOE_SCHEMES, MOE_KERNELS)
    assert not problems, "MoE dispatch table:\n  " + "\n  ".join(problems)


def _paths_with_dispatch_tables() -> list[str]:
    return [n for n, p in moe_paths().items() if hasattr(p, "table") and hasattr(p, "kernels")]


@pytest.mark.parametrize("path", _paths_with_dispatch_tables())
def test_moe_path_dispatch_table_is_consistent(path: str) -> None:
    """The same checks for the table and kernels of every registered MoE path that
    dispatches by table: a decision its kernel refuses would only ever show as a skip."""
    moe_path: Any = get_moe_path(path)
    problems = dispatch_problems(MOE_SCHEMES, moe_path.kernels, moe_path.table)
    assert not problems, f"MoE path {path!r} dispatch table:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("scheme", sorted(MOE_SCHEMES))
def test_moe_native_decision_runs_where_probed(scheme: str, qh_platform: PlatformInfo) -> None:
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
@pytest.mark.parametrize("scheme", sorted(MOE_SCHEMES))
def test_moe_checkpoint_and_routing_match_golden(
    scheme: str, golden_store: GoldenStore, qh_platform: PlatformInfo
) -> None:
    """The seeded inputs are those the golden was built from; then expert weights quantized
    on this device, static scales and the routing of all 64 tokens reproduce it bit for bit."""
    spec = get_scheme(scheme)
    data = load_golden(golden_store, golden_entry(scheme))
    t = data.tensors
    inputs = moe_inputs(scheme)
    # Inputs first, so a changed generator is never blamed on the quantizer.
    regenerated = {
        n: bit_mismatches(input_digest(inputs[n]), t[f"{n}_sha256"]) for n in SEEDED_INPUTS
    }
    changed = sorted(name for name, bad in regenerated.items() if bad)
    if changed:
        pytest.fail(
            f"seeded inputs changed: regenerated {changed} differ from the inputs golden "
            f"{golden_entry(scheme)!r} was built from (torch RNG or harness.core.inputs changed?); "
            f"if intended, refresh: {refresh_command('moe/*', golden_store.root)}",
            pytrace=False,
        )
    device = qh_platform.torch_device
    for name in SEEDED_WEIGHTS:
        q = quantize_experts(inputs[name].to(device), spec.weight)
        assert bit_mismatches(q.codes.cpu(), t[f"{name}_codes"]) == 0, f"{name} codes differ"
        assert bit_mismatches(q.scale.cpu(), t[f"{name}_scale"]) == 0, f"{name} scales differ"
    if spec.activation is not None and not spec.activation.dynamic:
        a1 = calibrate_input_scale(inputs["calibration_x"].to(device), spec.activation)
        assert bit_mismatches(a1.cpu(), t["a1_scale"]) == 0, "static input scale differs"
    logits = inputs["logits"].to(torch.bfloat16).float().to(device)  # checked by its digest
    for experts, top_k in EXPERT_CONFIGS:
        cfg = config_id(experts, top_k)
        for renormalize in RENORMALIZE:
            r = route(logits[:, :experts], top_k, renormalize)
            assert bit_mismatches(r.ids.cpu().to(torch.int32), t[f"{cfg}.ids"]) == 0, cfg
            weights = t[f"{cfg}.{renorm_id(renormalize)}.weights"]
            assert bit_mismatches(r.weights.cpu(), weights) == 0, f"{cfg} weights"


# ----------------------------------------------------------------------- the block
def _run(
    path_name: str, layer: MoELayer, x: torch.Tensor, routing: Routing, platform: PlatformInfo
) -> MoETrace:
    try:
        return get_moe_path(path_name).forward(layer, x, routing, platform)
    except Exception as exc:
        pytest.fail(f"MoE path {path_name!r} raised: {type(exc).__name__}: {exc}", pytrace=False)


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


def _block_checks(
    path_name: str,
    loaded: LoadedMoECase,
    top_k: int,
    renormalize: bool,
    hidden: int,
    qh_platform: PlatformInfo,
    record_result: RecordResult,
    record_checks: RecordChecks,
    exact: torch.Tensor | None = None,
) -> None:
    """Run one path on ``loaded`` and record every check of `MOE_CHECKS` (the test fails
    naming each failed one); ``exact``: the unquantized block's output, for the SQNR
    metric (reported, not gated)."""
    scheme = loaded.layer.scheme
    path = get_moe_path(path_name)
    numerics = path.numerics(scheme, qh_platform)
    record_result(kernel=kernel_name(path, scheme, qh_platform), numerics=numerics.describe())
    device = qh_platform.torch_device
    layer = loaded.layer

    routing = route(loaded.logits.to(device), top_k, renormalize)
    checks = routing_checks(routing, loaded)
    trace = _run(path_name, layer.to(device), loaded.x.to(device), routing, qh_platform)
    shapes = shape_checks(trace, loaded, hidden)
    if any(c.failed for c in shapes):  # the remaining checks need the problem's shapes
        record_checks(checks + shapes)
    routing = Routing(routing.ids.cpu(), routing.weights.cpu(), routing.num_experts)

    reference = None
    if not is_reference(path):
        emulated = get_moe_path("emulated")
        reference = ReferenceRun(
            _run("emulated", layer, loaded.x, routing, qh_platform),
            emulated.numerics(scheme, qh_platform),
        )
    record_result(**recorded_metrics(trace, loaded, routing, numerics, reference))
    if exact is not None:
        record_result(sqnr_db=sqnr_db(exact, trace.out.cpu()))  # reported, not gated
    block = moe_block_checks(path_name, trace, loaded, routing, numerics, reference)
    record_checks(checks + shapes + block)


@pytest.mark.parametrize("case", list(moe_cases()), ids=lambda c: c.id)
def test_moe(
    case: MoECase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """Every check of `harness.moe.checks.MOE_CHECKS`, each evaluated and recorded."""
    scheme = get_scheme(case.scheme)
    path = get_moe_path(case.path)
    support = path.supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    loaded = load_moe_case(load_golden(golden_store, case.golden_entry), case)
    exact = _unquantized_output(
        case.scheme, case.experts, case.top_k, case.tokens, case.renormalize
    )
    _block_checks(
        case.path,
        loaded,
        case.top_k,
        case.renormalize,
        MOE_HIDDEN,
        qh_platform,
        record_result,
        record_checks,
        exact,
    )


@pytest.mark.parametrize("case", list(long_k_cases()), ids=lambda c: c.id)
def test_moe_long_k(
    case: LongKMoECase,
    qh_platform: PlatformInfo,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """The same checks on the long-hidden design (`harness.moe.designs`): H 4160 or 4224,
    every token's amax in its last 64 columns, MX block maxima across a bf16 binade; the
    expected values are the float64 reference's, built from seeds here (no golden)."""
    scheme = get_scheme(case.scheme)
    support = get_moe_path(case.path).supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    loaded = long_k_case(case.scheme)
    _block_checks(
        case.path, loaded, LONG_TOP_K, False, case.hidden, qh_platform, record_result, record_checks
    )


@pytest.mark.parametrize("case", list(expert_bias_cases()), ids=lambda c: c.id)
def test_moe_expert_bias(
    case: ExpertBiasCase,
    golden_store: GoldenStore,
    qh_platform: PlatformInfo,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """A per-expert bias on both GEMMs (`harness.moe.bias_cases`): the same checks, against
    the float64 reference with the biases added once, after dequantization."""
    scheme = get_scheme(case.scheme)
    support = get_moe_path(case.path).supports(scheme, case.problem, qh_platform)
    if not support.ok:
        pytest.skip(support.reason)
    loaded = biased_case(load_golden(golden_store, case.golden_entry), case)
    _block_checks(
        case.path, loaded, case.top_k, False, MOE_HIDDEN, qh_platform, record_result, record_checks
    )


def test_moe_cases_cover_every_scheme_and_path() -> None:
    """The grid is what the docs promise: 3 token counts x 2 configs x 2 renormalize."""
    cases = list(moe_cases())
    assert {c.scheme for c in cases} == set(MOE_SCHEMES)
    per = len(TOKEN_COUNTS) * len(EXPERT_CONFIGS) * len(RENORMALIZE)
    assert len(cases) == len(MOE_SCHEMES) * len({c.path for c in cases}) * per
