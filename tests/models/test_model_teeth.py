"""The model suite catches each seed bug class put into vLLM's real loading path.

Each case loads a real checkpoint (made by llm-compressor) in vLLM with one bug class
injected into vLLM's loading (`qharness_vllm.model_capture.INJECTIONS`: the weight
iterator drops biases; one shard's per-tensor scale is used for all shards; a per-channel
scale vector is read as one tensor-wise scale, its first element; an ignore list entry
naming a fused module not honoured), runs the suite's layer
checks on what the engine then does, and asserts that the checks that must fail do fail,
while the clean run of the same checkpoint (shared in this process with the suite) passes
them all. The step-order bug (fnuz) runs vLLM's two post-load functions in both orders on
the real q/k/v shards of the calibrated per-tensor checkpoint on a simulated gfx942 (as
tests/loading/test_vllm_loader_order.py does on the golden cases): the CPU engine cannot
multiply e4m3fnuz, so that class is shown on vLLM's loading functions, not the engine.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import torch

_MISSING = [m for m in ("vllm", "transformers") if importlib.util.find_spec(m) is None]
if _MISSING:
    pytest.skip(
        f"model self-test needs {', '.join(_MISSING)} (python3 scripts/engine.py models)",
        allow_module_level=True,
    )
capture_module = pytest.importorskip(
    "qharness_vllm.model_capture", reason="vLLM adapter not installed"
)
loader_module = pytest.importorskip("qharness_vllm.loader", reason="vLLM adapter not installed")
from qharness_vllm.linear import VllmFp8LinearPath  # noqa: E402

from harness.core.checks import CheckResult  # noqa: E402
from harness.loading.invariants import shard_violations  # noqa: E402
from harness.models.cache import tool_python  # noqa: E402
from harness.models.evaluate import (  # noqa: E402
    ModelRun,
    layer_loading_results,
    layer_output_results,
    layer_selection_results,
    model_run,
)
from harness.models.recipes import RECIPES  # noqa: E402

PATH = VllmFp8LinearPath()
DYNAMIC = "llmcompressor:FP8_DYNAMIC"
STATIC = "llmcompressor:FP8"
if tool_python(RECIPES[DYNAMIC]) is None:
    pytest.skip(
        "llmcompressor is not installed here and QHARNESS_TOOL_PYTHON is unset "
        "(python3 scripts/engine.py models sets it up)",
        allow_module_level=True,
    )

# bug -> (model, recipe, checks of which at least one must fail on some layer)
BUGS: dict[str, tuple[str, str, frozenset[str]]] = {
    "dropped_bias": (
        "llama_tiny_bias",
        DYNAMIC,
        frozenset({"bias_is_checkpoint_bias", "vs_reference"}),
    ),
    "one_shard_scale_for_all": (
        "llama_tiny",
        STATIC,
        frozenset({"runtime_weight_matches_checkpoint"}),
    ),
    "one_d_scale_as_tensor_wise": (
        "llama_tiny",
        DYNAMIC,
        frozenset({"runtime_weight_matches_checkpoint"}),
    ),
}


def _all_checks(run: ModelRun) -> list[tuple[str, CheckResult]]:
    out: list[tuple[str, CheckResult]] = []
    for layer in run.model.quantized_layers():
        out += [(layer, r) for r in layer_loading_results(run, layer)]
        out += [
            (layer, r)
            for r in layer_output_results(
                run, layer, PATH.numerics, PATH.conventions, layer, torch.bfloat16
            )
        ]
    return out


def _run(tmp: Path, model: str, recipe: str, inject: str | None) -> ModelRun:
    work = tmp / f"{model}-{recipe.replace(':', '-')}"
    return model_run(
        model,
        recipe,
        lambda f, p: capture_module.capture(f, p, work, inject=inject),
        variant=inject or "",
    )


@pytest.fixture(scope="session")
def teeth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-teeth")


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_injected_bug_is_caught(bug: str, teeth_dir: Path, record_result: Any) -> None:
    model, recipe, must_fail = BUGS[bug]
    clean = _run(teeth_dir, model, recipe, None)
    if clean.refused():
        pytest.skip(f"clean run refused: {clean.refused()}")
    clean_failed = {(layer, r.name) for layer, r in _all_checks(clean) if r.failed}
    assert not clean_failed, f"the clean control fails: {sorted(clean_failed)}"
    broken = _run(teeth_dir, model, recipe, bug)
    if broken.refused():
        # a loader that cannot load a valid checkpoint is caught too: the suite fails there
        record_result(caught_by="load error", detail=broken.refused())
        return
    caught = sorted({(layer, r.name) for layer, r in _all_checks(broken) if r.failed})
    record_result(caught_by=[f"{layer}: {name}" for layer, name in caught])
    names = {name for _, name in caught}
    assert names & must_fail, f"{bug}: none of {sorted(must_fail)} failed; failed: {caught}"


# bug -> the recipe (a layer selection) whose checkpoint shows it
SELECTION_BUGS: dict[str, str] = {"ignore_by_shards_only": f"{DYNAMIC}+ignore_fused_name"}


@pytest.mark.parametrize("bug", sorted(SELECTION_BUGS))
def test_injected_selection_bug_is_caught(bug: str, teeth_dir: Path, record_result: Any) -> None:
    """A layer-selection bug (an ignore list naming a fused module not honoured) fails
    `test_layer_selection`'s checks, or the load; the clean run passes them."""
    recipe = SELECTION_BUGS[bug]
    clean = layer_selection_results(_run(teeth_dir, "llama_tiny", recipe, None))
    assert not [r for r in clean if r.failed], [r.verdict() for r in clean if r.failed]
    broken = _run(teeth_dir, "llama_tiny", recipe, bug)
    caught = [f"{r.name}: {r.verdict()}" for r in layer_selection_results(broken) if r.failed]
    record_result(caught_by=caught)
    assert caught, f"{bug}: every layer-selection check passed"


def test_fnuz_step_order_on_real_shards(teeth_dir: Path, record_result: Any) -> None:
    run = _run(teeth_dir, "llama_tiny", STATIC, None)
    layer = "model.layers.0.self_attn.qkv_proj"
    ckpt = run.checkpoint_layer(layer)
    assert ckpt is not None
    assert len(ckpt.shards) == 3
    scales = [float(s.weight_scale) for s in ckpt.shards if s.weight_scale is not None]
    record_result(shard_scales=scales)
    assert len(set(scales)) > 1, "the shards share one scale: no requantization to test"
    good = shard_violations(ckpt, loader_module.vllm_fp8_loader().load(ckpt, "e4m3fnuz"))
    bad = shard_violations(
        ckpt, loader_module.vllm_fp8_requantize_first_loader().load(ckpt, "e4m3fnuz")
    )
    assert not good, good
    assert bad, "requantize-before-normalize on fnuz was not caught on the real shards"
