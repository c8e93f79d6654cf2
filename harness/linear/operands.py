"""The operand checks: a path's quantized operands, bit for bit against the reference.

For a path that shows what it feeds its kernel (`harness.paths.operands`), four named
checks, in this order (`OPERAND_CHECKS`):

1. ``activation_codes``: the activation's element codes equal the reference quantizer's
   (readable reference codecs, ``reference=True``) on the same input, under the engine
   conventions the path declares for its activation quantizer;
2. ``activation_scales``: its scales (and a two-level format's per-tensor level) too;
3. ``weight_codes`` and 4. ``weight_scales``: the weight equals the loaded checkpoint's
   (the golden, itself held to the reference quantizer by ``test_quantize_matches_golden``).

Codes compare as integers, scales as float32 bit patterns (NaN scales of a 0xFF E8M0 block
equal only with equal bits). A code flushed to zero, a scale one binade off, a static
scale applied as a rounded reciprocal the path did not declare: each is a mismatch here
even where no output moves past its bound.
"""

from __future__ import annotations

import torch

from harness.core.checks import CheckResult, check_bit_exact, failed, not_applicable
from harness.core.quantize import QuantizedLinear, QuantizedTensor, quantize
from harness.paths.base import with_activation_conventions
from harness.paths.operands import QuantizedOperands

OPERAND_CHECKS = ("activation_codes", "activation_scales", "weight_codes", "weight_scales")


def expected_operands(
    layer: QuantizedLinear,
    x: torch.Tensor,
    conventions: frozenset[str] = frozenset(),
    model_dtype: torch.dtype | None = None,
) -> QuantizedOperands:
    """The reference operands of one call: the activation as the reference quantizer
    computes it from ``x`` (under the path's declared ``conventions``), the loaded weight.

    ``model_dtype``: for a path that declares it hands its engine the activation in the
    model dtype (`harness.paths.base.activation_in_model_dtype`), that dtype: the rounding
    to it happens before the engine's layer, so the reference quantizes the rounded values.
    """
    scheme = with_activation_conventions(layer.scheme, conventions)
    spec = scheme.activation
    activation = None
    if spec is not None:
        static = None if spec.dynamic else layer.input_scale
        fed = x if model_dtype is None else x.to(model_dtype).float()
        activation = quantize(fed, spec, static, reference=True)
    return QuantizedOperands(activation, layer.weight)


def _scales(role: str, got: QuantizedTensor, want: QuantizedTensor, path: str) -> CheckResult:
    name = f"{role}_scales"
    block = check_bit_exact(name, got.scale.float(), want.scale.float(), f"{path} {role} scales")
    if block.failed or (want.global_scale is None and got.global_scale is None):
        return block
    if got.global_scale is None or want.global_scale is None:
        has = "has" if got.global_scale is not None else "has no"
        return failed(name, f"{path} {role} {has} per-tensor scale level; the reference differs")
    return check_bit_exact(
        name,
        got.global_scale.float().reshape(1, 1),
        want.global_scale.float().reshape(1, 1),
        f"{path} {role} per-tensor scale level",
    )


def _operand_checks(
    role: str, got: QuantizedTensor | None, want: QuantizedTensor | None, path: str
) -> list[CheckResult]:
    codes, scales = f"{role}_codes", f"{role}_scales"
    if got is None and want is None:
        why = f"the scheme leaves the {role} unquantized"
        return [not_applicable(codes, why), not_applicable(scales, why)]
    if got is None or want is None:
        what = "none" if got is None else "a quantized one"
        message = f"{path} shows {what} for the {role}; the scheme says otherwise"
        return [failed(codes, message), failed(scales, message)]
    label = f"{path} {role} codes"
    code_check = check_bit_exact(codes, got.codes.to(torch.uint8), want.codes, label)
    if got.codes.dtype != torch.uint8:
        code_check = failed(codes, f"{label} are {got.codes.dtype}, not uint8 (one per element)")
    return [code_check, _scales(role, got, want, path)]


def operand_checks(got: QuantizedOperands, want: QuantizedOperands, path: str) -> list[CheckResult]:
    """Every check of `OPERAND_CHECKS`, in order, of what ``path`` showed against ``want``."""
    return [
        *_operand_checks("activation", got.activation, want.activation, path),
        *_operand_checks("weight", got.weight, want.weight, path),
    ]
