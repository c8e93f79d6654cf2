"""Scale selection: from a tile's absolute maximum to the scale that divides it.

A registry maps each `QuantSpec.scale_rounding` mode to a function
``(amax, spec) -> float32 scale``. FP32 scales use "exact" (amax / qmax); E8M0 (MX)
scales use one of the power-of-two modes that real stacks disagree on.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.schemes import QuantSpec

ScaleRule = Callable[[torch.Tensor, QuantSpec], torch.Tensor]
SCALE_RULES: dict[str, ScaleRule] = {}


def scale_rule(name: str) -> Callable[[ScaleRule], ScaleRule]:
    def register(fn: ScaleRule) -> ScaleRule:
        if name in SCALE_RULES:
            raise ValueError(f"scale rule {name!r} registered twice")
        SCALE_RULES[name] = fn
        return fn

    return register


def compute_scale(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """Scale per tile (float32) for tiles whose absolute maxima are ``amax``."""
    try:
        rule = SCALE_RULES[spec.scale_rounding]
    except KeyError:
        raise KeyError(
            f"unknown scale rounding {spec.scale_rounding!r}; known: {sorted(SCALE_RULES)}"
        ) from None
    return rule(amax.float(), spec)


@scale_rule("exact")
def _exact(amax: torch.Tensor, spec: QuantSpec) -> torch.Tensor:
    """amax / qmax in float32, so the tile's largest value maps onto the format's bound.

    A tile of zeros gets scale 1: its codes are zero whatever the scale, and 1 keeps the
    division finite. NaN/Inf maxima give NaN/Inf scales and surface as non-finite output.
    """
    scale = amax / spec.qmax
    return torch.where(amax == 0, torch.ones_like(scale), scale)
