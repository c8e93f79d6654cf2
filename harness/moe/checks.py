"""The MoE suite's checks of one path's block output, named and run in a fixed order.

Each stage is checked where it can be checked honestly (bounds: harness/moe/bounds.py):

1. ``routing_ids``, ``routing_weights``: routing on the device bit-exact vs the golden;
2. ``output_shape``, ``intermediate_shape``: the trace has the problem's shapes (a gate:
   the checks below need them);
3. ``output_finite``, ``intermediate_finite``: no NaN/Inf;
4. ``intermediate_vs_golden``: the intermediate before quantization within its derived
   bound of the golden's; ``intermediate_is_silu_of_gate_up``: it is SiLU(g) * u of the
   path's own GEMM-1 output evaluated in float32 (a reduced-precision activation hides
   inside the GEMM bounds otherwise);
5. ``intermediate_scales``, ``intermediate_codes``: the path's intermediate scales and codes
   are exactly the scheme's quantization of its own intermediate;
   ``intermediate_codes_within_bound``: each code lies between the codes of (golden -
   bound) and (golden + bound), so codes differ from the golden's only where the bound
   straddles a rounding boundary (weight-only schemes: n/a);
6. ``output_vs_own_intermediate``: the output within its bound of the float64 output from
   the path's own intermediate;
7. ``gemm1_agreement``, ``gemm2_agreement``: each grouped GEMM's output inside the rounded
   interval of its own operands and, against `emulated` on rows with identical operands,
   bit-identical wherever the bound fixes the rounded value (harness/moe/agreement.py).

Output vs golden and vs emulated follow from the above by the triangle inequality, so they
are recorded (`recorded_metrics`), not gated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.checks import (
    CheckResult,
    check_bit_exact,
    check_finite,
    check_within_bound,
    failed,
    first_offender,
    not_applicable,
    passed,
)
from harness.core.compare import unit_roundoff, within_bound
from harness.core.formats import decode
from harness.core.quantize import quantize
from harness.moe.agreement import GemmAgreement, gemm_agreement
from harness.moe.bounds import intermediate_bound, intermediate_delta, output_bound
from harness.moe.cases import LoadedMoECase
from harness.moe.model import (
    MoELayer,
    MoETrace,
    Routing,
    down_and_combine_f64,
    quantize_operand,
    silu_and_mul,
)
from harness.paths.base import Numerics

U32 = unit_roundoff(torch.float32)

MOE_CHECKS = (
    "routing_ids",
    "routing_weights",
    "output_shape",
    "intermediate_shape",
    "output_finite",
    "intermediate_finite",
    "intermediate_vs_golden",
    "intermediate_is_silu_of_gate_up",
    "intermediate_scales",
    "intermediate_codes",
    "intermediate_codes_within_bound",
    "output_vs_own_intermediate",
    "gemm1_agreement",
    "gemm2_agreement",
)
QUANTIZED_INTERMEDIATE_CHECKS = MOE_CHECKS[8:11]


def routing_checks(routing: Routing, loaded: LoadedMoECase) -> list[CheckResult]:
    """Routing indices and weights bit-exact vs the golden."""
    return [
        check_bit_exact("routing_ids", routing.ids.cpu(), loaded.ids, "routing indices differ"),
        check_bit_exact(
            "routing_weights", routing.weights.cpu(), loaded.weights, "routing weights differ"
        ),
    ]


def _shape_check(name: str, got: torch.Size, expected: tuple[int, ...]) -> CheckResult:
    if tuple(got) == tuple(expected):
        return passed(name)
    return failed(name, f"shape {tuple(got)}, expected {tuple(expected)}")


def shape_checks(trace: MoETrace, loaded: LoadedMoECase, hidden: int) -> list[CheckResult]:
    """The output is [tokens, hidden] and the intermediate has the golden's shape."""
    return [
        _shape_check("output_shape", trace.out.shape, (loaded.x.shape[0], hidden)),
        _shape_check("intermediate_shape", trace.act.shape, tuple(loaded.act_ref.shape)),
    ]


def intermediate_values(trace: MoETrace) -> torch.Tensor:
    """What the path fed to its second GEMM: dequantized codes, or the float intermediate."""
    return trace.act.cpu() if trace.act_q is None else trace.act_q.to("cpu").dequantize()


# Two float32 evaluations of SiLU(g) * u = g * sigmoid(g) * u (exp, add, divide, two
# multiplies; exp itself within a couple of ulps) each err by a few u32: 16 u32 relative
# between them. A bf16 evaluation errs by ~2^-9 relative, 2^15 times more.
SILU_FP32_ULPS = 16


def check_silu_of_gate_up(act: torch.Tensor, trace: MoETrace) -> CheckResult:
    """The intermediate is SiLU-and-mul of the path's own gate/up output, in float32."""
    name = "intermediate_is_silu_of_gate_up"
    if trace.gate_up is None:
        return not_applicable(name, "the trace has no gate_up (gemm1_agreement reports it)")
    own = silu_and_mul(trace.gate_up.cpu().float())
    bound = SILU_FP32_ULPS * U32 * own.double().abs()
    return check_within_bound(
        name, act, own, bound, "intermediate vs SiLU-and-mul of its own gate_up in float32"
    )


@dataclass(frozen=True)
class ReferenceRun:
    """The emulated path's trace on the same layer and routing, and its numerics."""

    trace: MoETrace
    numerics: Numerics


def _intermediate_quantization_checks(
    act: torch.Tensor, trace: MoETrace, loaded: LoadedMoECase, act_bound: torch.Tensor
) -> list[CheckResult]:
    """The path's intermediate codes are exactly quantize(its intermediate), and lie within
    what the bound around the golden intermediate allows."""
    layer = loaded.layer
    spec = layer.scheme.activation
    names = QUANTIZED_INTERMEDIATE_CHECKS
    if spec is None:
        return [not_applicable(n, "weight-only scheme: no quantized intermediate") for n in names]
    missing = (
        "the path returned no quantized intermediate"
        if trace.act_q is None
        else "the golden has no intermediate codes"
        if loaded.act_q is None
        else None
    )
    if missing is not None or trace.act_q is None or loaded.act_q is None:
        return [failed(n, str(missing)) for n in names]
    act_q = trace.act_q.to("cpu")
    flips = {"intermediate_code_flips_vs_golden": int((act_q.codes != loaded.act_q.codes).sum())}
    static = None if spec.dynamic else layer.a2_scale
    expected = quantize(act, spec, static)
    ref = loaded.act_ref.double()
    down, up = torch.tensor(-torch.inf), torch.tensor(torch.inf)
    lo = quantize(torch.nextafter((ref - act_bound).float(), down), spec, act_q.scale)
    hi = quantize(torch.nextafter((ref + act_bound).float(), up), spec, act_q.scale)
    value = decode(act_q.codes, spec.format)
    lo_v, hi_v = decode(lo.codes, spec.format), decode(hi.codes, spec.format)
    outside = (value < lo_v) | (value > hi_v)
    within = (
        passed(names[2], **flips)
        if not bool(outside.any())
        else failed(
            names[2],
            f"{int(outside.sum())} intermediate codes outside what the bound allows",
            first_offender(outside, value, (lo_v, hi_v)),
            **flips,
        )
    )
    return [
        check_bit_exact(names[0], act_q.scale, expected.scale, "intermediate scales"),
        check_bit_exact(names[1], act_q.codes, expected.codes, "intermediate codes"),
        within,
    ]


def _gemm_check(name: str, path: str, found: GemmAgreement) -> CheckResult:
    gemm = name.split("_")[0]
    metrics = {
        f"{gemm}_outside_own_interval": found.outside_own,
        f"{gemm}_comparable_vs_emulated": found.comparable,
        f"{gemm}_determined_vs_emulated": found.determined,
        f"{gemm}_mismatched_vs_emulated": found.mismatched,
    }
    if found.ok:
        return passed(name, **metrics)
    return failed(name, f"{gemm} of {path}: {found.describe()}", found.offender, **metrics)


def _on_cpu(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.cpu()


def gemm_checks(
    path: str,
    trace: MoETrace,
    loaded: LoadedMoECase,
    routing: Routing,
    numerics: Numerics,
    reference: ReferenceRun | None,
) -> list[CheckResult]:
    """Each grouped GEMM's output, element by element (`gemm_agreement`)."""
    layer = loaded.layer
    own_a2 = intermediate_values(trace)
    ref_a2 = own_a2 if reference is None else intermediate_values(reference.trace)
    a1 = quantize_operand(loaded.x, layer.scheme.activation, layer.a1_scale).values
    a1 = a1[routing.row_tokens()]  # every path quantizes x the same way (bit-exact)
    w13, w2 = layer.w13.dequantize(), layer.w2.dequantize()
    ref = None if reference is None else reference.trace
    gemms = (  # name, this path's output and left operand, the reference's, the weights
        ("gemm1_agreement", trace.gate_up, a1, None if ref is None else ref.gate_up, a1, w13),
        ("gemm2_agreement", trace.y, own_a2, None if ref is None else ref.y, ref_a2, w2),
    )
    biases = {"gemm1_agreement": layer.b13, "gemm2_agreement": layer.b2}
    results = []
    for name, y, a, ref_y, ref_a, w in gemms:
        if y is None or (reference is not None and ref_y is None):
            results.append(
                failed(
                    name,
                    f"MoE path {path!r} (or emulated) returned a MoETrace without the "
                    f"{name.split('_')[0]} output (gate_up / y); run_moe fills them, see "
                    "docs/MOE.md",
                )
            )
            continue
        if numerics.output_roundings > 1:
            # The interval is that of one rounding; two (e.g. a truncating conversion under
            # Triton's interpreter) are held by the output bound (harness.moe.bounds) only.
            results.append(
                not_applicable(
                    name,
                    f"{path} declares {numerics.output_roundings} roundings to its output "
                    "dtype; the single-rounding interval does not apply (the bound does)",
                )
            )
            continue
        against = None
        if reference is not None and ref_y is not None:
            against = (ref_y.cpu(), ref_a, reference.numerics)
        bias = biases[name]
        found = gemm_agreement(
            y.cpu(), a, w, routing.row_experts(), numerics, against, _on_cpu(bias)
        )
        results.append(_gemm_check(name, path, found))
    return results


def moe_block_checks(
    path: str,
    trace: MoETrace,
    loaded: LoadedMoECase,
    routing: Routing,
    numerics: Numerics,
    reference: ReferenceRun | None,
) -> list[CheckResult]:
    """Checks 3 to 7 of one block (``routing`` on CPU; shapes already checked)."""
    layer = loaded.layer
    out, act = trace.out.cpu(), trace.act.cpu()
    # Intermediate before quantization: derived bound, plus the golden's float32 storage.
    act_bound = intermediate_bound(layer, loaded.x, routing, numerics)
    act_bound = act_bound + U32 * loaded.act_ref.double().abs()
    own_a2 = intermediate_values(trace)
    out_bound = output_bound(layer, own_a2, routing, numerics)
    own_ref = down_and_combine_f64(own_a2, layer.w2.dequantize(), routing, _on_cpu(layer.b2))
    return [
        check_finite("output_finite", out, "outputs"),
        check_finite("intermediate_finite", act, "intermediate values"),
        check_within_bound(
            "intermediate_vs_golden",
            act,
            loaded.act_ref,
            act_bound,
            "intermediate vs golden",
            worst_ratio="act_worst_error_to_bound",
        ),
        check_silu_of_gate_up(act, trace),
        *_intermediate_quantization_checks(act, trace, loaded, act_bound),
        check_within_bound(
            "output_vs_own_intermediate",
            out,
            own_ref,
            out_bound,
            "output vs float64 from its own intermediate",
            worst_ratio="worst_error_to_bound",
        ),
        *gemm_checks(path, trace, loaded, routing, numerics, reference),
    ]


def recorded_metrics(
    trace: MoETrace,
    loaded: LoadedMoECase,
    routing: Routing,
    numerics: Numerics,
    reference: ReferenceRun | None,
) -> dict[str, float]:
    """Output vs golden and vs emulated: implied by ``output_vs_own_intermediate`` (triangle
    inequality), so recorded, not gated."""
    layer: MoELayer = loaded.layer
    out = trace.out.cpu()
    own_a2 = intermediate_values(trace)
    out_bound = output_bound(layer, own_a2, routing, numerics)
    w2 = layer.w2.dequantize()
    if loaded.act_q is not None and layer.scheme.activation is not None:
        golden_a2 = loaded.act_q.dequantize().double()
        storage = torch.zeros(1, dtype=torch.float64)
    else:
        golden_a2 = loaded.act_ref.double()
        storage = U32 * golden_a2.abs()  # golden intermediate stored in float32
    # vs golden: the own-intermediate bound plus the exact effect of the intermediate
    # difference and the golden's float32 storage.
    delta = intermediate_delta(own_a2, golden_a2, w2, routing.ids, routing.weights)
    delta = delta + intermediate_delta(
        storage.expand_as(golden_a2), torch.zeros_like(golden_a2), w2, routing.ids, routing.weights
    )
    golden_bound = out_bound + delta + U32 * loaded.out_ref.double().abs()
    vs_golden = within_bound(out, loaded.out_ref, golden_bound)
    metrics = {
        "max_abs_err_vs_golden": vs_golden.max_abs_error,
        "worst_error_to_bound_vs_golden": vs_golden.worst_ratio,
    }
    if reference is not None:
        ref_a2 = intermediate_values(reference.trace)
        both = (
            out_bound
            + output_bound(layer, ref_a2, routing, reference.numerics)
            + intermediate_delta(own_a2, ref_a2, w2, routing.ids, routing.weights)
        )
        vs_emulated = within_bound(out, reference.trace.out.cpu(), both)
        metrics["worst_error_to_bound_vs_emulated"] = vs_emulated.worst_ratio
    return metrics
