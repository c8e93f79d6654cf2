"""aiter's torch MoE routers as routing paths (`harness.RouterMoEPathBase`), checked by
suites/test_moe_routing.py: ``biased_grouped_topk_torch`` (sigmoid scores, a correction
bias, groups scored by their best two biased scores) and ``grouped_topk_torch`` (softmax
or sigmoid, groups scored by their best score), both in ``aiter/ops/topk.py``, the torch
versions of aiter's HIP grouped top-k ("copied from sglang", aiter's own references).

``aiter/ops/topk.py`` cannot be imported without ROCm (its module imports aiter's JIT,
which asks for the HIP version), so the two functions are compiled from that installed
file's source, unchanged, with the names they use (``torch``; ``dtypes.fp32``/``i32``, the
float32 and int32 of ``aiter/utility/dtypes.py``). Neither takes a routed scaling factor:
the path multiplies the weights by it afterwards, as aiter's HIP version does inside.
Both return their top-k unsorted (``sorted=False``) and break ties by ``torch.topk``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from harness import (
    FindingCase,
    KnownFinding,
    PlatformInfo,
    RouterMoEPathBase,
    Routing,
    RoutingSpec,
    Support,
)

TOPK_FILE = os.path.join("ops", "topk.py")
FUNCTIONS = ("biased_grouped_topk_torch", "grouped_topk_torch")


def _aiter_dir() -> str:
    """aiter's installed package folder, found without running its ``__init__``: the bare
    package module the interpreter setup registers (no ``__spec__``, its ``__path__`` the
    installed folder) when a kernel path ran first in this process, else the import system's
    spec."""
    loaded = sys.modules.get("aiter")
    locations = list(getattr(loaded, "__path__", None) or ())
    if not locations:
        spec = importlib.util.find_spec("aiter")  # locates the package, runs nothing
        locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise ImportError("aiter (amd-aiter) is not installed")
    return str(locations[0])


@functools.cache
def aiter_torch_routers() -> dict[str, Callable[..., Any]]:
    """The functions `FUNCTIONS` as aiter's installed ``ops/topk.py`` defines them."""
    path = os.path.join(_aiter_dir(), TOPK_FILE)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in FUNCTIONS]
    if sorted(d.name for d in defs) != sorted(FUNCTIONS):
        raise ImportError(f"{path} no longer defines {FUNCTIONS}")
    dtypes = types.SimpleNamespace(fp32=torch.float32, i32=torch.int32)
    namespace: dict[str, Any] = {"torch": torch, "dtypes": dtypes, "__name__": "aiter.ops.topk"}
    exec(compile(ast.Module(body=defs, type_ignores=[]), path, "exec"), namespace)
    return {name: namespace[name] for name in FUNCTIONS}


def _grouped_bias_negative(case: FindingCase) -> bool:
    """A grouped routing case with a correction bias (``...-g<n>k<m>-bias...``)."""
    parts = case.case.split("-")
    return "bias" in parts and any(p.startswith("g") and p[1:2].isdigit() for p in parts)


_ZERO_MASK = (
    "aiter (ops/topk.py): biased_grouped_topk_torch fills the experts of the groups not "
    "chosen with 0.0, not -inf, so where chosen experts' biased scores (sigmoid + correction "
    "bias) are negative, masked experts are taken instead "
    "(integrations/aiter/findings/biased_grouped_topk_torch_zero_mask.py)"
)


class AiterRouterBase(RouterMoEPathBase):
    """One of aiter's torch routers (module docstring)."""

    ranks_slots = False  # sorted=False
    tie_break = "any"  # torch.topk: equal scores in no promised order

    def supports(self, scheme: Any, problem: Any, platform: PlatformInfo) -> Support:
        try:
            aiter_torch_routers()
        except (ImportError, OSError, SyntaxError) as exc:
            return Support.no(f"aiter's ops/topk.py: {type(exc).__name__}: {exc}")
        return super().supports(scheme, problem, platform)

    def scaled(self, weights: torch.Tensor, ids: torch.Tensor, spec: RoutingSpec) -> Routing:
        return Routing(ids.long(), weights.float() * spec.routed_scaling_factor, 0)


class AiterBiasedGroupedTopkTorch(AiterRouterBase):
    """``biased_grouped_topk_torch``: sigmoid scores with a correction bias."""

    name = "aiter_biased_grouped_topk_torch"
    known_findings = (
        KnownFinding(_ZERO_MASK, suites=frozenset({"moe_routing"}), when=_grouped_bias_negative),
    )

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.scoring != "sigmoid" or spec.correction_bias is None:
            return Support.no("biased_grouped_topk_torch: sigmoid scores with a correction bias")
        return Support.yes()

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        e = int(logits.shape[1])
        fn = aiter_torch_routers()["biased_grouped_topk_torch"]
        weights, ids = fn(
            logits,
            spec.bias(e, logits.device),
            spec.top_k,
            spec.renormalize,
            spec.n_group,
            spec.topk_group,
        )
        r = self.scaled(weights, ids, spec)
        return Routing(r.ids, r.weights, e)


class AiterGroupedTopkTorch(AiterRouterBase):
    """``grouped_topk_torch``: softmax or sigmoid scores, no correction bias."""

    name = "aiter_grouped_topk_torch"

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.correction_bias is not None:
            return Support.no("grouped_topk_torch takes no correction bias")
        return Support.yes()

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        e = int(logits.shape[1])
        fn = aiter_torch_routers()["grouped_topk_torch"]
        weights, ids = fn(
            logits, spec.top_k, spec.renormalize, spec.n_group, spec.topk_group, spec.scoring
        )
        r = self.scaled(weights, ids, spec)
        return Routing(r.ids, r.weights, e)
