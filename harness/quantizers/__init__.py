"""Quantizers: built-in reference plus those registered through ``qharness.quantizers``.

Modules, each with its one job:

- ``base``, ``reference``, ``expect``, ``mx_edge_cases``, ``mx_scale_points``,
  ``degenerate``, ``repro``: `Quantizer` protocol and registry (built-in `reference` +
  `qharness.quantizers` entry points); what a quantizer is held to (the golden, or the
  reference under its declared conventions) and the per-tile mismatch check; MX edge-case
  blocks at every E8M0 binade; the points where each E8M0 mode's answer changes (one float32
  step either side, every float32 binade; `mx_scale_points/<format>` goldens); degenerate
  tensors (zero, one non-zero element, subnormal, at the max) for every spec whose scales
  come from the tensor; designed tensors for every spec (`designed_tensors` in the suite,
  from `harness/core/hard_inputs.py`: float32 values beside ties, bf16 binade crossings,
  long rows); standalone repro scripts of quantizer findings (engine, torch and numpy only;
  expected values from the reference). `suites/test_quantizers.py` runs them. The MX scale
  edge-case blocks are regenerated at test time, checked against the golden's digest, with
  their `mx_scales/<format>` goldens.
- ``layout``: An engine's raw scale tensor held to the shapes its own API documents, before
  an adapter reshapes it onto the tile grid (`check_scale_layout`).
"""

from __future__ import annotations

import functools

from harness.quantizers.base import Quantizer, engine_of
from harness.quantizers.reference import ReferenceQuantizer
from harness.registry import by_unique_name, load_entry_points, lookup

ENTRY_POINT_GROUP = "qharness.quantizers"
BUILTIN_QUANTIZERS: tuple[Quantizer, ...] = (ReferenceQuantizer(),)

__all__ = [
    "BUILTIN_QUANTIZERS",
    "ENTRY_POINT_GROUP",
    "Quantizer",
    "engine_of",
    "get_quantizer",
    "quantizers",
]


@functools.cache
def quantizers() -> dict[str, Quantizer]:
    """All quantizers by name: built-ins first, then entry points. Names must be unique."""
    external = load_entry_points(ENTRY_POINT_GROUP, Quantizer, "docs/ENGINES-ADAPTERS.md")  # type: ignore[type-abstract]
    return by_unique_name((*BUILTIN_QUANTIZERS, *external), "quantizer")


def get_quantizer(name: str) -> Quantizer:
    return lookup(quantizers(), name, "quantizer")
