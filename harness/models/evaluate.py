"""One model run (a tool's checkpoint and an engine's capture of it) and its checks.

The engine side is a ``capture`` function an adapter supplies (vLLM's:
``qharness_vllm.model_capture.capture``); it returns the engine-neutral capture dict that
module documents (``layers`` with runtime ``tensors``, ``calls`` per prompt, ``hidden``,
``lm_head``, ``param_bytes``, or ``error``). `model_run` makes each (model, recipe, capture
variant) once per process and keeps it, so the suite and its self-test share one engine
start per checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from harness.core.checks import CheckResult, failed, passed
from harness.loading.checkpoint import LinearCheckpoint
from harness.models import cache as model_cache
from harness.models.files import (
    ModelCheckpoint,
    as_harness_checkpoint,
    layer_modules,
    read_model_checkpoint,
)
from harness.models.layers import (
    RuntimeTensors,
    layer_reference,
    loading_checks,
    output_checks,
    runtime_layer,
    sqnr_check,
)
from harness.models.recipes import RECIPES, Recipe
from harness.models.selection import FLOAT, QUANTIZED, expected_layer_states, shards_of
from harness.models.tiny import MODELS, TinyModel, prompts
from harness.paths.base import LinearProblem, Numerics

Capture = Callable[[Path, list[list[int]]], dict[str, Any]]
NumericsOf = Callable[[Any, LinearProblem], Numerics]


@dataclass
class ModelRun:
    """A checkpoint folder, its files as read, the prompts, and the engine's capture."""

    model: TinyModel
    recipe: Recipe
    float_folder: Path
    folder: Path
    ckpt: ModelCheckpoint
    prompts: list[list[int]]
    capture: dict[str, Any]
    _float: dict[str, torch.Tensor] = field(default_factory=dict)

    def refused(self) -> str | None:
        """The engine's reason when it would not load or run the checkpoint."""
        error = self.capture.get("error")
        return None if error is None else f"{self.capture.get('engine', 'engine')}: {error}"

    def checkpoint_layer(self, layer: str) -> LinearCheckpoint | None:
        return (
            as_harness_checkpoint(self.ckpt, layer) if layer in layer_modules(self.ckpt) else None
        )

    def runtime(self, layer: str) -> RuntimeTensors:
        captured = self.capture["layers"][layer]
        t = captured["tensors"]
        return RuntimeTensors(
            t["weight"],
            t["weight_scale"],
            t.get("input_scale"),
            t.get("bias"),
            captured["weight_input_dim"],
        )

    def inputs_outputs(self, layer: str) -> tuple[torch.Tensor, torch.Tensor]:
        calls = [c for per_prompt in self.capture["calls"][layer] for c in per_prompt]
        return torch.cat([x for x, _ in calls]), torch.cat([y for _, y in calls])

    def float_tensors(self) -> dict[str, torch.Tensor]:
        """The float checkpoint's tensors (read once)."""
        if not self._float:
            for file in sorted(self.float_folder.glob("*.safetensors")):
                self._float |= load_file(str(file))
        return self._float

    def float_weight(self, layer: str) -> torch.Tensor:
        tensors = self.float_tensors()
        return torch.cat([tensors[f"{m}.weight"] for m in layer_modules(self.ckpt)[layer]])


_RUNS: dict[tuple[str, str, str], ModelRun] = {}


def model_run(model: str, recipe: str, capture: Capture, variant: str = "") -> ModelRun:
    """The run of ``model`` quantized by ``recipe``, captured once per process per variant."""
    key = (model, recipe, variant)
    if key not in _RUNS:
        m, r = MODELS[model], RECIPES[recipe]
        float_folder, folder = model_cache.checkpoints(m, r)
        ckpt = read_model_checkpoint(folder)
        ids = prompts(m)
        _RUNS[key] = ModelRun(m, r, float_folder, folder, ckpt, ids, capture(folder, ids))
    return _RUNS[key]


def layer_loading_results(run: ModelRun, layer: str) -> list[CheckResult]:
    """Shard widths, and the runtime tensors against the checkpoint files."""
    ckpt = run.checkpoint_layer(layer)
    captured = run.capture["layers"].get(layer)
    if ckpt is None or captured is None:
        where = "the checkpoint" if ckpt is None else "the engine"
        return [failed("layer_quantized", f"{layer} is not quantized in {where}")]
    widths = tuple(captured["logical_widths"])
    shard_widths = (
        passed("shard_widths")
        if widths == ckpt.widths
        else failed("shard_widths", f"engine {list(widths)} vs files {list(ckpt.widths)}")
    )
    return [shard_widths, *loading_checks(ckpt, run.runtime(layer), run.ckpt.scheme)]


def layer_output_results(
    run: ModelRun,
    layer: str,
    numerics_of: NumericsOf,
    conventions: frozenset[str],
    path: str,
    out_dtype: torch.dtype,
) -> list[CheckResult]:
    """Every captured output of ``layer`` against the harness reference for its input."""
    ckpt = run.checkpoint_layer(layer)
    if ckpt is None or layer not in run.capture["layers"]:
        return [failed("layer_quantized", f"{layer} is not quantized")]
    x, y = run.inputs_outputs(layer)
    n, k = y.shape[-1], x.shape[-1]
    scheme = run.ckpt.scheme
    quantized = runtime_layer(scheme, run.runtime(layer), n, k, ckpt.bias)
    numerics = numerics_of(
        scheme, LinearProblem(x.shape[0], n, k, ckpt.bias is not None, out_dtype)
    )
    ref = layer_reference(quantized, x, numerics, conventions)
    results = output_checks(y, ref, numerics, path)
    results.append(sqnr_check(y, x, run.float_weight(layer), ckpt.bias, scheme))
    return results


def layer_selection_results(run: ModelRun) -> list[CheckResult]:
    """Every layer vLLM builds against the recipe's layer selection (harness.models.selection):
    quantized where it must be, in the model dtype with the checkpoint's weight bit for bit
    where it is left float, nothing else quantized, and a refusal naming the layer where a
    fused layer's shards disagree. The capture's ``linears`` hold every linear and MoE
    module the engine built."""
    expected = expected_layer_states(run.model, run.recipe.selection)
    error = run.capture.get("error")
    mixed = sorted(layer for layer, state in expected.items() if state not in (QUANTIZED, FLOAT))
    if mixed:
        if error is None:
            return [failed("mixed_shards_refused", f"loaded {mixed}, whose shards disagree")]
        unnamed = [layer for layer in mixed if layer not in error]
        if unnamed:
            return [failed("mixed_shards_refused", f"refused without naming {unnamed}: {error}")]
        return [passed("mixed_shards_refused")]
    if error is not None:
        return [failed("layers_built", f"the engine refused the checkpoint: {error}")]
    built: dict[str, dict[str, Any]] = run.capture["linears"]
    missing = sorted(set(expected) - set(built))
    wrong = sorted(
        layer
        for layer, state in expected.items()
        if layer in built and (state == QUANTIZED) != bool(built[layer]["quantized"])
    )
    methods = [f"{layer} ({built[layer]['method_class']})" for layer in wrong]
    extra = sorted(
        layer for layer, got in built.items() if got["quantized"] and layer not in expected
    )
    floats = [layer for layer, state in expected.items() if state == FLOAT and layer in built]
    return [
        failed("layers_built", f"not built by the engine: {missing}")
        if missing
        else passed("layers_built", layers=len(built)),
        failed("layers_as_selected", f"quantized or not against the recipe: {methods}")
        if wrong
        else passed("layers_as_selected", quantized=len(expected) - len(floats)),
        failed("nothing_else_quantized", f"quantized, the recipe leaves float: {extra}")
        if extra
        else passed("nothing_else_quantized"),
        *(_float_layer_check(run, layer, built[layer]) for layer in floats if layer not in wrong),
    ]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)


def _float_layer_check(run: ModelRun, layer: str, got: dict[str, Any]) -> CheckResult:
    """A layer left float holds the checkpoint's model-dtype weight, which is the float
    model's (the tool left it alone), bit for bit."""
    name = f"float_weight[{layer}]"
    weight = got.get("weight")
    if weight is None:
        return failed(name, f"{layer}: the engine holds no plain weight ({got['method_class']})")
    shards = shards_of(layer)
    files = torch.cat([run.ckpt.tensors[f"{m}.weight"] for m in shards])
    source = torch.cat([run.float_tensors()[f"{m}.weight"] for m in shards])
    if weight.dtype != source.dtype:
        return failed(name, f"engine weight {weight.dtype}, the model's {source.dtype}")
    for what, want in (("checkpoint", files), ("float model", source)):
        if want.shape != weight.shape:
            return failed(
                name, f"engine weight {list(weight.shape)}, the {what}'s {list(want.shape)}"
            )
        if not torch.equal(_bits(want), _bits(weight)):
            differ = int((_bits(want) != _bits(weight)).sum())
            return failed(name, f"the engine's weight differs from the {what}'s in {differ} bytes")
    return passed(name)
