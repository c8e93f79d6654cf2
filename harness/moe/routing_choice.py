"""Which expert choices a `RoutingSpec` allows: exact ties by its rule, near-ties either way.

`reference_route` gives one routing; a float32 router may legitimately choose otherwise
only where two keys (or two group scores) are closer than its own rounding can resolve.
The one tolerance, stated once: keys i, j closer than ``NEAR_TIE_RTOL`` (2^-16) times the
larger of their magnitudes (|score| + |bias|, summed over a group's scoring members) are a
near-tie that either order may take (a float32 router's key errs by at most ~50 u32 =
2^-18.4 of it here: softmax over <= 16 experts of logits in [-8, 8], one bias addition).
Equal keys are ordered by the spec's tie-break rule (lower index first), or either way for
a path that declares tie_break "any" (its top-k is torch.topk's, which promises no order).
Anything farther apart is decided, and a choice against it is a routing error: the
designed near-ties of `harness.moe.routing_designs` are 2^-13..2^-11 apart, closer than a
bf16 (2^-8) or fp16 (2^-11) step, so a router that ranks a rounded copy of the scores gets
them wrong.
"""

from __future__ import annotations

import itertools

import torch

from harness.moe.routing import GROUP_SCORE_TOP, RoutingSpec, scores_and_keys

NEAR_TIE_RTOL = 2.0**-16


def _precedes(a: float, b: float, mag: float, ia: int, ib: int, by_index: bool) -> bool:
    """Whether a (index ia) must be ranked before b (index ib): farther ahead than the
    near-tie tolerance, or exactly equal with the lower index (``by_index``: the
    lower-index rule applies; tie_break "any" takes exact ties either way)."""
    if a - b > NEAR_TIE_RTOL * mag:
        return True
    return by_index and a == b and ia < ib


def _group_terms(
    keys: torch.Tensor, mags: torch.Tensor, spec: RoutingSpec
) -> tuple[list[float], list[float]]:
    """One token's group scores (as `harness.moe.routing.group_scores`) and magnitudes."""
    per = keys.numel() // spec.n_group
    scores, magnitudes = [], []
    for g in range(spec.n_group):
        k, m = keys[g * per : (g + 1) * per], mags[g * per : (g + 1) * per]
        top = GROUP_SCORE_TOP if spec.correction_bias is not None else 1
        idx = torch.topk(k, top).indices
        scores.append(float(k[idx].sum()))
        magnitudes.append(float(m[idx].sum()))
    return scores, magnitudes


def choice_problem(
    keys: torch.Tensor,
    mags: torch.Tensor,
    spec: RoutingSpec,
    ids: list[int],
    tie_break: str = "lower_index",
) -> str | None:
    """Why one token's chosen experts ``ids`` are not an outcome ``spec`` allows (None: they
    are). ``keys``/``mags``: float64 [E] keys and their magnitudes."""
    e = keys.numel()
    per = e // spec.n_group
    kl, ml = keys.tolist(), mags.tolist()
    by_index = tie_break == "lower_index"
    used = {i // per for i in ids}
    if len(set(ids)) != len(ids):
        return f"an expert chosen twice: {ids}"
    if len(used) > spec.topk_group:
        return f"experts from {len(used)} groups, at most {spec.topk_group} may be used"
    gs, gm = _group_terms(keys, mags, spec)
    others = [g for g in range(spec.n_group) if g not in used]
    reasons = []
    for extra in itertools.combinations(others, spec.topk_group - len(used)):
        chosen = used | set(extra)
        out = [h for h in range(spec.n_group) if h not in chosen]
        bad = [
            (h, g)
            for g in chosen
            for h in out
            if _precedes(gs[h], gs[g], max(gm[h], gm[g]), h, g, by_index)
        ]
        if bad:
            h, g = bad[0]
            reasons.append(f"group {h} (score {gs[h]:.9g}) outranks chosen group {g} ({gs[g]:.9g})")
            continue
        pool = [i for i in range(e) if i // per in chosen and i not in ids]
        worse = [
            (f, i)
            for i in ids
            for f in pool
            if _precedes(kl[f], kl[i], max(ml[f], ml[i]), f, i, by_index)
        ]
        if not worse:
            return None
        f, i = worse[0]
        reasons.append(f"expert {f} (key {kl[f]:.9g}) outranks chosen expert {i} ({kl[i]:.9g})")
    return reasons[0] if reasons else "no group selection allows these experts"


def order_problem(
    keys: torch.Tensor, mags: torch.Tensor, ids: list[int], tie_break: str = "lower_index"
) -> str | None:
    """Why one token's slots ``ids`` are not in descending key order (ties by the rule)."""
    kl, ml = keys.tolist(), mags.tolist()
    for a, b in itertools.pairwise(ids):
        if _precedes(kl[b], kl[a], max(ml[a], ml[b]), b, a, tie_break == "lower_index"):
            return f"expert {b} (key {kl[b]:.9g}) slotted after {a} ({kl[a]:.9g})"
    return None


def keys_and_magnitudes(
    logits: torch.Tensor, spec: RoutingSpec
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float64 scores, keys and key magnitudes (|score| + |bias|) [T, E]."""
    scores, keys = scores_and_keys(logits, spec)
    bias = spec.bias(int(logits.shape[1]))
    mags = scores.abs() if bias is None else scores.abs() + bias.double().abs()
    return scores, keys, mags
