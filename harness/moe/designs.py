"""A designed MoE case family: long hidden rows whose amax lies in their last columns.

The golden MoE cases have H = 32 and bf16-valued activations, so two fault classes change
nothing there (docs/TEETH.md): a per-token (or per-tensor) activation amax taken over a
prefix of K, and an MX block scale taken from a bf16 copy of a float32 activation. This
family is built from seeds at test time (no golden): H = 4160 = 130 * 32 (4224 = 33 * 128
where a scale tile is 128 wide), no multiple of 256..1024; every token row's largest
magnitude sits in its last `LONG_TAIL` columns (`tail_amax`); for MX activations every
32-element block's amax is then moved to where bf16 rounding changes its scale
(`binade_crossing`, so x holds float32 values there). Few tokens, experts and intermediate
columns keep it cheap. The expected values are the float64 reference on the reference
quantizer's layer (`reference_moe`), which the goldens hold bit for bit elsewhere.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from harness.core.fused import FUSED_MIN_ELEMENTS
from harness.core.hard_inputs import binade_crossing, tail_amax
from harness.core.inputs import generator, scaled_normal
from harness.core.schemes import QuantSpec, Scheme, get_scheme
from harness.moe.cases import (
    GATE_UP_MAGNITUDE,
    OUTPUT_MAGNITUDE,
    LoadedMoECase,
    config_id,
    power_of_two_factor,
)
from harness.moe.dispatch import MOE_SCHEMES
from harness.moe.model import quantize_moe, reference_moe, route
from harness.moe.paths import MoEProblem, moe_paths
from harness.paths.case import Case

LONG_TOKENS = 4
LONG_EXPERTS = 3
LONG_TOP_K = 2
LONG_INTERMEDIATE = 32
LONG_TAIL = 64  # columns at the end of every token row that hold its amax
LONG_SEED = "moe_long_k"
LONGEST_HIDDEN = 4224
# The expert weights [E, 2I, H] stay below the size from which the codecs compile their
# fused kernels (seconds per new shape): the family runs eager, in well under a second.
assert LONG_EXPERTS * 2 * LONG_INTERMEDIATE * LONGEST_HIDDEN < FUSED_MIN_ELEMENTS


def long_hidden(scheme: Scheme) -> int:
    """4160 = 130 * 32, or 4224 = 33 * 128 where a scale tile is 128 wide (whole blocks)."""
    widths = {s.block[1] for s in (scheme.weight, scheme.activation) if s is not None}
    return LONGEST_HIDDEN if 128 in widths else 4160


def crosses_bf16_binade(spec: QuantSpec | None) -> bool:
    """MX activations: one-level power-of-two block scales, which bf16 rounding of a block's
    amax can move by a binade (`binade_crossing`)."""
    return spec is not None and spec.scale_fmt.power_of_two and not spec.scale_fmt.per_tensor_level


@dataclass(frozen=True)
class LongKMoECase(Case):
    """One scheme x path of the long-hidden family (top-2 of 3 experts, not renormalized)."""

    SUITE = "moe"
    ID = ("scheme", "path", "tokens_id", "config", "design_id")
    RECORD = (
        "scheme",
        "path",
        "shape=shape_label",
        "experts",
        "top_k",
        "renormalize",
        "design",
    )
    tokens_id = f"t{LONG_TOKENS}"
    config = config_id(LONG_EXPERTS, LONG_TOP_K)
    experts = LONG_EXPERTS
    top_k = LONG_TOP_K
    renormalize = False
    design = "long_k"

    scheme: str
    path: str

    @property
    def hidden(self) -> int:
        return long_hidden(get_scheme(self.scheme))

    @property
    def design_id(self) -> str:
        return f"long_k{self.hidden}"

    @property
    def shape_label(self) -> str:
        return f"t{LONG_TOKENS}-h{self.hidden}-i{LONG_INTERMEDIATE}"

    @property
    def problem(self) -> MoEProblem:
        return MoEProblem(LONG_TOKENS, LONG_EXPERTS, LONG_TOP_K, self.hidden, LONG_INTERMEDIATE)


# The schemes the family runs, one or more per class it is built for (each costs about a
# tenth of a second a path): per-token dynamic activations, where an amax over a prefix of
# H shows (both FP8 flavours); 128-wide scale tiles (H 4224); MX activations, where a block
# scale from a bf16 copy shows (E8M0 floor and rceil, FP4 / FP8 elements); a static and a
# weight-only scheme, for the long reduction itself.
LONG_K_SCHEMES = (
    "fp8_per_tensor",
    "fp8_per_channel",
    "fp8_per_channel_fnuz",
    "fp8_per_block",
    "w_mxfp4",
    "w_mxfp4_a_mxfp4",
    "w_mxfp4_a_mxfp4@rceil",
    "w_mxfp4_a_fp8",
    "w_mxfp8_a_mxfp8",
)
assert set(LONG_K_SCHEMES) <= set(MOE_SCHEMES)


def long_k_cases() -> Iterator[LongKMoECase]:
    for scheme in LONG_K_SCHEMES:
        for path in moe_paths():
            yield LongKMoECase(scheme, path)


def long_k_inputs(scheme_name: str) -> dict[str, torch.Tensor]:
    """x [T, H] (tail amax; MX: block amax across a bf16 binade), logits [T, E] (bf16
    values), w13 [E, 2I, H] and w2 [E, H, I], scaled by powers of two as the golden
    inputs are (`harness.moe.cases.moe_inputs`)."""
    scheme = get_scheme(scheme_name)
    base = f"{LONG_SEED}/{scheme.input_seed_name}"
    h, i = long_hidden(scheme), LONG_INTERMEDIATE
    x = tail_amax(scaled_normal(f"{base}/x", LONG_TOKENS, h, scheme.activation), LONG_TAIL)
    if crosses_bf16_binade(scheme.activation):
        assert scheme.activation is not None
        x = binade_crossing(x, scheme.activation)
    w13, w2 = [], []
    for e in range(LONG_EXPERTS):
        a = scaled_normal(f"{base}/w13/{e}", 2 * i, h, scheme.weight)
        peak = (x.double() @ a.double().t()).abs().max().item()
        a = a * power_of_two_factor(peak, GATE_UP_MAGNITUDE)
        g, u = (x.double() @ a.double().t()).chunk(2, dim=-1)
        b = scaled_normal(f"{base}/w2/{e}", h, i, scheme.weight)
        peak = ((g * torch.sigmoid(g) * u) @ b.double().t()).abs().max().item()
        w13.append(a)
        w2.append(b * power_of_two_factor(peak, OUTPUT_MAGNITUDE))
    logits = 2.0 * torch.randn(LONG_TOKENS, LONG_EXPERTS, generator=generator(f"{base}/logits"))
    return {
        "x": x,
        "logits": logits.to(torch.bfloat16).float(),
        "w13": torch.stack(w13),
        "w2": torch.stack(w2),
    }


@functools.cache
def long_k_case(scheme_name: str) -> LoadedMoECase:
    """The family's case for a scheme, expected values from the float64 reference. Static
    scales are calibrated on the fed batch itself, so they cover the planted peaks. Built
    once per process and scheme (every path's test reads it; none modifies it)."""
    inputs = long_k_inputs(scheme_name)
    x = inputs["x"]
    routing = route(inputs["logits"], LONG_TOP_K, False)
    layer = quantize_moe(inputs["w13"], inputs["w2"], get_scheme(scheme_name), (x, routing))
    ref = reference_moe(layer, x, routing)
    return LoadedMoECase(
        layer=layer,
        x=x,
        logits=inputs["logits"],
        ids=routing.ids,
        weights=routing.weights,
        act_ref=ref.act.float(),
        act_q=ref.act_q,
        out_ref=ref.out.float(),
    )
