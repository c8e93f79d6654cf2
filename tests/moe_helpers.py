"""Local (unregistered) schemes and small MoE layers for the MoE self-tests.

These schemes use only what this branch's scale rules provide ("exact" float32 scales), so
block and MX-like tile specs are exercised without registering anything.
"""

from __future__ import annotations

import torch

from harness.inputs import scaled_normal
from harness.moe import MoELayer, quantize_moe, route
from harness.schemes import QuantSpec, Scheme


def local_scheme(name: str, weight: QuantSpec, activation: QuantSpec | None) -> Scheme:
    return Scheme(name, "test", weight, activation, 0.0, f"local test scheme {name}")


W_MXFP4_LIKE = local_scheme("w_mxfp4", QuantSpec("e2m1", block=(1, 32)), None)
W_MXFP4_A_MXFP6_LIKE = local_scheme(
    "w_mxfp4_a_mxfp6_e3m2",
    QuantSpec("e2m1", block=(1, 32)),
    QuantSpec("e3m2", block=(1, 32), dynamic=True),
)
FP8_PER_CHANNEL_LIKE = local_scheme(
    "fp8_per_channel",
    QuantSpec("e4m3fn", block=(1, None)),
    QuantSpec("e4m3fn", block=(1, None), dynamic=True),
)
FP8_PER_BLOCK_LIKE = local_scheme(
    "fp8_per_block",
    QuantSpec("e4m3fn", block=(128, 128)),
    QuantSpec("e4m3fn", block=(1, 128), dynamic=True),
)
FP8_STATIC_LIKE = local_scheme(
    "fp8_static", QuantSpec("e4m3fn"), QuantSpec("e4m3fn", dynamic=False)
)
LOCAL_SCHEMES = (
    W_MXFP4_LIKE,
    W_MXFP4_A_MXFP6_LIKE,
    FP8_PER_CHANNEL_LIKE,
    FP8_PER_BLOCK_LIKE,
    FP8_STATIC_LIKE,
)


def small_moe(
    scheme: Scheme, tokens: int = 9, experts: int = 4, top_k: int = 2, h: int = 64, i: int = 32
) -> tuple[MoELayer, torch.Tensor, torch.Tensor]:
    """A seeded layer, x [tokens, h] and logits [tokens, experts] for ``scheme``."""
    base = f"tests/moe/{scheme.name}"
    x = scaled_normal(f"{base}/x", tokens, h, scheme.activation) / 64
    w13 = torch.stack(
        [scaled_normal(f"{base}/w13/{e}", 2 * i, h, scheme.weight) / 64 for e in range(experts)]
    )
    w2 = torch.stack(
        [scaled_normal(f"{base}/w2/{e}", h, i, scheme.weight) / 16 for e in range(experts)]
    )
    logits = scaled_normal(f"{base}/logits", tokens, experts, None)
    layer = quantize_moe(w13, w2, scheme, calibration=(x, route(logits, top_k, False)))
    return layer, x, logits
