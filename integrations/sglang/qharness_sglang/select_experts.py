"""SGLang's ``select_experts`` with its ``TopKConfig`` as a routing path, the way SGLang's
``TopK`` layer calls it on ROCm without aiter (``SGLANG_USE_AITER`` unset, its default).

``select_experts`` (``sglang/srt/layers/moe/topk.py``) reads the whole routing policy from
a ``TopKConfig`` and dispatches on it: grouped routing (``use_grouped_topk``) to
``grouped_topk`` (``grouped_topk_gpu`` off CPU/XPU) or, with a correction bias, to
``biased_grouped_topk`` (``biased_grouped_topk_gpu``, which on ROCm without aiter and
without the opt-in JIT router falls back to ``biased_grouped_topk_impl``); ungrouped routing
with ``torch_native`` to ``fused_topk_torch_native`` (softmax or sigmoid scores, an optional
correction bias) and then, for ``apply_routed_scaling_factor_on_output``, multiplies the
weights by ``routed_scaling_factor`` itself; then ``_post_process_topk_ids`` (HIP: the
padded-region mask, the EPLB remap when a mapping exists, the routed-experts capture and
the distribution recorder). The path sets ``torch_native=True`` as ``TopK.forward_native``
does: SGLang's HIP default for ungrouped softmax routing is ``topk_softmax``, a compiled
HIP kernel that no CPU runs. The routed scaling factor is applied on the output
(``apply_routed_scaling_factor_on_output=True``), as the harness's reference returns it.

``topk.py`` imports SGLang's serving stack, so the functions and classes `COMPILED` are
compiled from the installed file's source, unchanged but for their ``@torch.compile``
decorators (a compiler hint), with the module constants `CONSTANTS` and module state
`MODULE_STATE` as SGLang sets them on ROCm without aiter; what they reach outside the file
is `EXTERNALS`: SGLang's own ``envs`` (``sglang.srt.environ``, standard library only), its
``has_per_rank_fused_shared_slots`` rule, and stubs for the serving runtime (no server
args published, so no EPLB remap, as in SGLang's own unit tests; no routed-experts
capturer; a distribution recorder that records nothing). A GPU kernel the dispatch might
reach (``topk_softmax``, the JIT routers, aiter) is a refusing stub: reaching one fails
the case. Everything replaced is listed in docs/ENGINES-ADAPTERS.md.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import importlib.util
import math
import os
import types
import typing
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from harness import PlatformInfo, RouterMoEPathBase, Routing, RoutingSpec, Support
from qharness_sglang.loader import sglang_root
from qharness_sglang.router import TOPK_FILE

COMPILED = (
    "TopKOutputFormat",
    "StandardTopKOutput",
    "StandardTopKOutputPacked",
    "TopKConfig",
    "select_experts",
    "fused_topk_torch_native",
    "grouped_topk_gpu",
    "biased_grouped_topk_gpu",
    "biased_grouped_topk_impl",
    "_post_process_topk_ids",
    "_mask_topk_ids_padded_region",
    "_zero_topk_weights_padded_region",
    "_biased_grouped_topk_postprocess",
    "capture_routed_experts_if_allowed",
    "is_expert_remapping_enabled",
    "is_routed_scaling_factor_fused_in_topk",
    "fused_shared_expert_weight",
    "_fused_gate_emits_packed_ids",
    "_fused_gate_masks_padded_rows",
    "is_power_of_two",
)
CONSTANTS = ("_RENORMALIZE_SUM_EPSILON",)
# topk.py's module-level platform state on a ROCm GPU without aiter
MODULE_STATE: dict[str, Any] = {
    "_is_cuda": False,
    "_is_hip": True,
    "_is_cpu": False,
    "_is_cpu_amx_available": False,
    "_is_xpu": False,
    "_is_npu": False,
    "_is_musa": False,
    "_use_aiter": False,
    "_SGLANG_EXPERIMENTAL_LORA_OPTI": False,
    "_skip_hip_pad_mask": False,  # SGLANG_MORI_NO_PAD_MASK unset
    "fused_topk_deepseek": None,  # flashinfer's, CUDA only
}


def _gpu_kernel(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"select_experts reached {name}, a GPU kernel no CPU runs")

    return refuse


def _no_server_args() -> Any:
    # what SGLang's get_server_args raises outside a server (is_expert_remapping_enabled
    # catches it: no EPLB mapping)
    raise ValueError("server args are not initialized")


class _NoRecorder:
    """``get_global_expert_distribution_recorder()`` with no recording configured."""

    def on_select_experts(self, topk_ids: torch.Tensor) -> None:
        return None


def _sglang_file(relpath: str) -> types.ModuleType:
    """One of SGLang's modules loaded from its installed file alone, under a private name
    (importing it by its own name would run the ``sglang`` package ``__init__``)."""
    path = os.path.join(sglang_root(), relpath)
    name = "qharness_sglang._sglang_" + relpath.removesuffix(".py").replace(os.sep, "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _externals(arch: str) -> dict[str, Any]:
    envs = _sglang_file(os.path.join("srt", "environ.py")).envs  # standard library only

    def has_per_rank_fused_shared_slots(num_fused_shared_experts: int) -> bool:
        # sglang.srt.layers.moe.utils: needs EP > 1 with shared slots; none here
        return False

    gpu = (
        "topk_softmax",
        "topk_sigmoid",
        "biased_topk_jit_kernel_impl",
        "biased_topk_xpu",
        "aiter_biased_grouped_topk",
        "aiter_fused_topk",
        "moe_fused_gate",
        "mask_topk_ids",
        "rocm_router_reduce_partials",
        "topk_ids_logical_to_physical",
        "fused_topk",
        "grouped_topk_cpu",
        "biased_grouped_topk_cpu",
        "fused_topk_cpu",
        "grouped_topk_xpu",
        "apply_routing_simulation",
        "fused_topk_softmax_torch_raw_logits",
    )
    return {
        **{name: _gpu_kernel(name) for name in gpu},
        "envs": envs,
        "has_per_rank_fused_shared_slots": has_per_rank_fused_shared_slots,
        "get_server_args": _no_server_args,
        "get_global_experts_capturer": lambda: None,
        "get_global_expert_distribution_recorder": _NoRecorder,
        "expert_location_dispatch": types.SimpleNamespace(
            transform_select_experts_inputs=lambda router_logits, correction_bias, info: (
                router_logits,
                correction_bias,
            )
        ),
        "_is_gfx95": arch == "gfx950",
        "SharedExpertsConfig": _shared_experts_config(),
    }


class _Struct:
    """``msgspec.Struct`` as ``SharedExpertsConfig`` uses it (msgspec is one of SGLang's
    dependencies the ``--no-deps`` install leaves out): its subclasses become frozen
    dataclasses with the same fields and defaults."""

    def __init_subclass__(cls, frozen: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=frozen)(cls)


def _shared_experts_config() -> Any:
    """SGLang's ``SharedExpertsConfig`` (``srt/configs/shared_experts.py``), its class body
    as installed, on `_Struct` for ``msgspec.Struct``."""
    path = os.path.join(sglang_root(), "srt", "configs", "shared_experts.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    body = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SharedExpertsConfig"]
    if len(body) != 1:
        raise ImportError(f"{path} no longer defines SharedExpertsConfig")
    namespace: dict[str, Any] = {
        "__name__": __name__,
        "msgspec": types.SimpleNamespace(Struct=_Struct),
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    return namespace["SharedExpertsConfig"]


@functools.cache
def sglang_select_experts(arch: str) -> dict[str, Any]:
    """``select_experts`` and ``TopKConfig`` as SGLang's installed ``topk.py`` defines them
    (module doc), for a ROCm GPU of ``arch``."""
    path = os.path.join(sglang_root(), TOPK_FILE)
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in CONSTANTS for t in node.targets
        ):
            body.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in COMPILED:
            if isinstance(node, ast.FunctionDef):
                node.decorator_list = []  # @torch.compile(...): a compiler hint
            body.append(node)
    named = sorted(n.name for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)))
    if named != sorted(COMPILED):
        raise ImportError(f"{path} no longer defines {sorted(set(COMPILED) - set(named))}")
    namespace: dict[str, Any] = {
        "__name__": __name__,  # a module in sys.modules: dataclasses reads its namespace
        "torch": torch,
        "F": F,
        "math": math,
        **{name: getattr(typing, name) for name in typing.__all__ if hasattr(typing, name)},
        "dataclass": dataclasses.dataclass,
        "field": dataclasses.field,
        "IntEnum": enum.IntEnum,
        "auto": enum.auto,
        **MODULE_STATE,
        **_externals(arch),
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    namespace["grouped_topk"] = namespace["grouped_topk_gpu"]  # topk.py, off CPU and XPU
    namespace["biased_grouped_topk"] = namespace["biased_grouped_topk_gpu"]
    namespace["fused_topk_native"] = namespace["fused_topk_torch_native"]
    return namespace


class SglangSelectExperts(RouterMoEPathBase):
    """``select_experts`` under a ``TopKConfig`` built from the routing spec (module doc)."""

    name = "sglang_select_experts"
    ranks_slots = False  # torch.topk(sorted=False) in the grouped and biased routers
    tie_break = "any"  # torch.topk: equal scores in no promised order

    def supports(self, scheme: Any, problem: Any, platform: PlatformInfo) -> Support:
        try:
            sglang_select_experts(platform.arch)
        except (ImportError, OSError, SyntaxError) as exc:
            return Support.no(f"sglang's topk.py: {type(exc).__name__}: {exc}")
        return super().supports(scheme, problem, platform)

    def supports_routing(self, spec: RoutingSpec, platform: PlatformInfo) -> Support:
        if spec.scoring not in ("softmax", "sigmoid"):
            return Support.no(f"{self.name}: softmax or sigmoid scores, not {spec.scoring}")
        if spec.grouped and spec.correction_bias is not None and spec.scoring != "sigmoid":
            return Support.no(f"{self.name}: SGLang's biased grouped routing scores by sigmoid")
        return Support.yes()

    def route(self, logits: torch.Tensor, spec: RoutingSpec, x: torch.Tensor) -> Routing:
        e = int(logits.shape[1])
        from harness import detect_platform

        mod = sglang_select_experts(detect_platform().arch)
        config = mod["TopKConfig"](
            top_k=spec.top_k,
            use_grouped_topk=spec.grouped,
            topk_group=spec.topk_group if spec.grouped else None,
            num_expert_group=spec.n_group if spec.grouped else None,
            renormalize=spec.renormalize,
            correction_bias=None if spec.correction_bias is None else spec.bias(e, logits.device),
            torch_native=True,  # TopK.forward_native (module doc)
            routed_scaling_factor=spec.routed_scaling_factor,
            apply_routed_scaling_factor_on_output=True,
            scoring_func=spec.scoring,
        )
        out = mod["select_experts"](x, logits, config, layer_id=0)
        return Routing(out.topk_ids.long(), out.topk_weights.float(), e)
