"""Small seeded MoE layers and a spread of registered schemes for the MoE self-tests.

The schemes cover each kind of weight/activation tile the MoE block must handle: MX 1x32
blocks with E8M0 scales (weight-only and with MX activations), FP8 per-channel, FP8
128x128 / 1x128 blocks (one partial tile at these sizes) and FP8 per-tensor with a static
activation scale.
"""

from __future__ import annotations

import torch

from harness.core.inputs import scaled_normal
from harness.core.schemes import SCHEMES, Scheme
from harness.moe.model import MoELayer, quantize_moe, route

W_MXFP4 = SCHEMES["w_mxfp4"]
W_MXFP4_A_MXFP6 = SCHEMES["w_mxfp4_a_mxfp6_e3m2"]
FP8_PER_CHANNEL = SCHEMES["fp8_per_channel"]
FP8_PER_BLOCK = SCHEMES["fp8_per_block"]
FP8_STATIC = SCHEMES["fp8_per_tensor"]  # per-tensor weights, static per-tensor input scale
TILE_KINDS = (W_MXFP4, W_MXFP4_A_MXFP6, FP8_PER_CHANNEL, FP8_PER_BLOCK, FP8_STATIC)


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
