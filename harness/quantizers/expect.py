"""What a quantizer is held to: the golden, or the reference under its declared conventions.

A quantizer that declares no convention applying to a spec must reproduce the golden bit
for bit. One that declares conventions is held to the reference quantizer run with those
conventions in effect: the expectation is computed by the reference's implementation of
each convention (harness.core.conventions), never copied from the quantizer under test.
"""

from __future__ import annotations

import torch

from harness.core.conventions import with_conventions
from harness.core.quantize import QuantizedTensor, quantize
from harness.core.schemes import QuantSpec
from harness.paths.findings import KnownFinding, finding_rules
from harness.quantizers.base import Quantizer


def expected_spec(quantizer: Quantizer, spec: QuantSpec) -> QuantSpec:
    """``spec`` with those of the quantizer's declared conventions that apply to it."""
    return with_conventions(spec, quantizer.conventions)


def expectation(
    quantizer: Quantizer,
    spec: QuantSpec,
    x: torch.Tensor,
    golden: QuantizedTensor,
    scale: torch.Tensor | None = None,
) -> QuantizedTensor:
    """The golden when no declared convention applies, else the reference's result."""
    held_to = expected_spec(quantizer, spec)
    if held_to == spec:
        return golden
    return quantize(x, held_to, scale)


def finding_models(
    quantizer: Quantizer,
    spec: QuantSpec,
    findings: list[KnownFinding],
    x: torch.Tensor,
    scale: torch.Tensor | None = None,
) -> list[QuantizedTensor] | None:
    """What the engine gives on ``x`` if it does exactly what its matching findings say:
    the reference under each finding's rules (``behaves_as``) in place of the declared
    conventions it ``replaces``, and under all of them at once when several match. None
    when a matching finding names no rules: it covers its whole case, so there is nothing
    to scope by."""
    if not findings or not all(f.behaves_as for f in findings):
        return None
    groups = [[f] for f in findings]
    if len(groups) > 1:
        groups.append(list(findings))
    declared = frozenset(quantizer.conventions)
    models = []
    for group in groups:
        rules = finding_rules(group, declared)
        assert rules is not None  # every finding names its rules (checked above)
        models.append(quantize(x, with_conventions(spec, rules), scale))
    return models


def code_and_scale_mismatches(
    actual: QuantizedTensor, expected: QuantizedTensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per scale tile: (element codes differ anywhere in the tile, stored scale bits differ).

    Scales are compared as float32 bits (E8M0 scales are exact powers of two there); NaN
    scales are equal to each other and never to a number. The element codes of an
    MX block whose scale is NaN (E8M0 0xFF) in both are not compared: the OCP MX spec makes
    every element of such a block NaN, whatever its code.
    """
    spec = expected.spec
    if actual.codes.shape != expected.codes.shape:
        raise AssertionError(
            f"codes shape {tuple(actual.codes.shape)}, expected {tuple(expected.codes.shape)}"
        )
    if actual.scale.shape != expected.scale.shape:
        raise AssertionError(
            f"scale shape {tuple(actual.scale.shape)}, expected {tuple(expected.scale.shape)}"
        )
    a_scale, e_scale = actual.scale.float().cpu(), expected.scale.float().cpu()
    # Equal float32 bits, or NaN in both (the E8M0 0xFF code; NaN payloads do not matter). A
    # scale the stored format cannot hold (an E8M0 scale below 2^-127, an Inf) never matches.
    a_bits, e_bits = a_scale.view(torch.int32), e_scale.view(torch.int32)
    scale_wrong = ~((a_bits == e_bits) | (torch.isnan(a_scale) & torch.isnan(e_scale)))
    code_wrong = actual.codes.cpu() != expected.codes.cpu()
    rows, cols = expected.scale.shape
    br = spec.block[0] or expected.codes.shape[0]
    bc = spec.block[1] or expected.codes.shape[1]
    pr, pc = rows * br - code_wrong.shape[0], cols * bc - code_wrong.shape[1]
    padded = torch.nn.functional.pad(code_wrong, (0, pc, 0, pr))
    tile_codes_wrong = padded.reshape(rows, br, cols, bc).any(dim=3).any(dim=1)
    if expected.global_scale is not None:  # a two-level format: the per-tensor level too
        g_a = None if actual.global_scale is None else actual.global_scale.float().cpu()
        g_e = expected.global_scale.float().cpu()
        same = g_a is not None and bool(
            (g_a.view(torch.int32) == g_e.view(torch.int32)).all()
            or (torch.isnan(g_a).all() and torch.isnan(g_e).all())
        )
        if not same:  # every block is scaled by it, so every block's scale is wrong
            scale_wrong = torch.ones_like(scale_wrong)
    if spec.scale_fmt.nan_for_nonfinite_block:
        both_nan = torch.isnan(a_scale) & torch.isnan(e_scale)
        tile_codes_wrong = tile_codes_wrong & ~both_nan
    return tile_codes_wrong, scale_wrong
