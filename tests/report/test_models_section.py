"""The model section: synthetic model-suite records reach every report and the history, and a
drop of the logits quality is a regression in the nightly report (no vLLM needed).

The records are shaped as suites/test_models.py writes them: case fields ``model``, ``tool``,
``preset``, ``model_check`` among the metrics, the logits test's quality metrics on it, and
every optional field may be missing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.report.model.models_section import (
    LOGITS_METRICS,
    MODEL_COLUMNS,
    TOP1_DROP,
    model_regressions,
    model_rows,
    model_values,
)
from harness.report.model.nightly import build_report
from harness.report.outputs.html_page import render_html
from harness.report.outputs.markdown import full_markdown, summary_markdown
from harness.report.outputs.text import regressions, render_report
from harness.report.reading.frame import COLUMNS, records_frame
from harness.report.reading.results import SCHEMA, ResultsError, read_results
from harness.report.reading.runs import add_runs, load_run, open_history

MODELS = "suites/test_models.py"
PLATFORM = {"device": "cpu", "arch": "x86_64", "name": "x86_64", "torch_version": "2.13.0"}
FULL = {
    "sqnr_db": 24.3,
    "top1_agreement": 0.914,
    "sqnr_vs_emulated_db": 26.3,
    "top1_agreement_vs_emulated": 0.883,
    "emulated_sqnr_db": 24.2,
    "emulated_top1_agreement": 0.898,
    "positions": 128,
}


def _case(model: str, preset: str, check: str) -> dict[str, Any]:
    return {
        "suite": "models",
        "model": model,
        "tool": "llmcompressor",
        "preset": preset,
        "scheme": "fp8_per_channel",
        "model_check": check,
    }


def _logits(model: str, preset: str, outcome: str = "passed", **metrics: Any) -> dict[str, Any]:
    return {
        "nodeid": f"{MODELS}::test_model_logits[{model}-llmcompressor:{preset}]",
        "suite": "models",
        "scheme": "fp8_per_channel",
        "outcome": outcome,
        "reason": "vLLM runs no fp8_per_block here: no AMX" if outcome == "skipped" else None,
        "metrics": {**_case(model, preset, "logits"), **metrics},
    }


def _layer(model: str, preset: str, layer: str, outcome: str) -> dict[str, Any]:
    return {
        "nodeid": f"{MODELS}::test_layer_output[{model}-llmcompressor:{preset}-{layer}]",
        "outcome": outcome,
        "metrics": _case(model, preset, "layer_output"),
    }


def _write(path: Path, created: str, records: list[dict[str, Any]]) -> Path:
    doc = {
        "schema": SCHEMA,
        "created": created,
        "exitstatus": 0,
        "platform": PLATFORM,
        "records": records,
    }
    path.write_text(json.dumps(doc))
    return path


def _run(tmp_path: Path, name: str, created: str, **logits: Any) -> Path:
    """One run: llama_tiny FP8_DYNAMIC (``logits`` override its metrics) with two layer
    tests, FP8_BLOCK skipped, and a record with only the case fields (metrics missing)."""
    records = [
        _logits("llama_tiny", "FP8_DYNAMIC", **{**FULL, **logits}),
        _layer("llama_tiny", "FP8_DYNAMIC", "qkv_proj", "passed"),
        _layer("llama_tiny", "FP8_DYNAMIC", "o_proj", "failed"),
        _logits("llama_tiny", "FP8_BLOCK", outcome="skipped"),
        _layer("llama_tiny", "FP8_BLOCK", "qkv_proj", "skipped"),
        _logits("llama_tiny_bias", "FP8"),  # ran, but recorded no metrics
        {"nodeid": "suites/test_linear.py::test_linear[x]", "outcome": "passed"},
    ]
    return _write(tmp_path / f"{name}.json", created, records)


def test_model_values_are_the_history_columns_and_tolerate_missing_fields() -> None:
    full = model_values({**_case("m", "P", "logits"), **FULL})
    assert set(full) == set(MODEL_COLUMNS)
    assert full["model"] == "m"
    assert full["model_tool"] == "llmcompressor"
    assert full["top1_agreement"] == 0.914
    empty = model_values({})
    assert all(v is None for v in empty.values())
    wrong = model_values({"model": 3, "top1_agreement": "high", "sqnr_vs_emulated_db": True})
    assert all(v is None for v in wrong.values())
    assert set(MODEL_COLUMNS) <= set(COLUMNS)


def test_rows_per_model_and_preset_count_layer_tests(tmp_path: Path) -> None:
    frame = load_run(_run(tmp_path, "a", "2026-01-01T00:00:00Z")).frame
    rows = {(r.model, r.preset): r for r in model_rows(frame)}
    assert sorted(rows) == [
        ("llama_tiny", "FP8_BLOCK"),
        ("llama_tiny", "FP8_DYNAMIC"),
        ("llama_tiny_bias", "FP8"),
    ]
    dyn = rows[("llama_tiny", "FP8_DYNAMIC")]
    assert dyn.outcome == "passed"
    assert dyn.metrics == {k: v for k, v in FULL.items() if k != "positions"}
    assert dyn.layers == {"passed": 1, "failed": 1}
    block = rows[("llama_tiny", "FP8_BLOCK")]
    assert block.outcome == "skipped"
    assert "AMX" in (block.reason or "")
    assert block.layers == {"skipped": 1}
    bare = rows[("llama_tiny_bias", "FP8")]
    assert all(v is None for v in bare.metrics.values())
    assert bare.layers == {}
    # a frame of runs without any model test (or from before these columns) has no rows
    assert model_rows(frame[frame["model"].isna()]) == []
    assert model_rows(frame.drop(columns=list(MODEL_COLUMNS))) == []


MISSING_MARKERS = re.compile(r"\b(nan|<NA>|None|NaT)\b")


def _section(text: str, start: str) -> str:
    return text[text.index(start) :]


def test_every_report_renders_the_section(tmp_path: Path) -> None:
    path = _run(tmp_path, "a", "2026-01-01T00:00:00Z")
    report = build_report([path])
    texts = {
        "summary": _section(summary_markdown(report), "### Models"),
        "markdown": _section(full_markdown(report), "## Models"),
        "text": _section(render_report(path), "## Models"),
        "html": _section(render_html(report, tmp_path / "report.html"), "<h2>Models"),
    }
    for where, shown in texts.items():
        text = shown.replace("\\", "")  # Markdown escapes (FP8\_DYNAMIC) read as text
        assert "llmcompressor:FP8_DYNAMIC" in text, where
        for value in ("24.3 dB", "0.914", "26.3 dB", "0.883", "24.2 dB, 0.898"):
            assert value in text, (where, value)
        assert "1 passed, 1 failed" in text, where
        assert "no AMX" in text, where  # the skip's reason
        assert not MISSING_MARKERS.search(text), (where, MISSING_MARKERS.search(text))
    # no model tests: no section
    plain = _write(
        tmp_path / "plain.json",
        "2026-01-01T00:00:00Z",
        [{"nodeid": "suites/test_linear.py::test_linear[x]", "outcome": "passed"}],
    )
    assert "Models" not in full_markdown(build_report([plain]))
    assert "Models" not in render_report(plain)


def test_a_drop_is_a_regression_and_noise_is_not(tmp_path: Path) -> None:
    old = _run(tmp_path, "old", "2026-01-01T00:00:00Z")
    small = _run(
        tmp_path,
        "small",
        "2026-01-02T00:00:00Z",
        top1_agreement=FULL["top1_agreement"] - TOP1_DROP + 0.01,
        sqnr_vs_emulated_db=FULL["sqnr_vs_emulated_db"] - 0.9,
    )
    assert build_report([old, small]).regressions == []
    assert regressions(small, old) == []
    dropped = _run(
        tmp_path,
        "dropped",
        "2026-01-02T00:00:00Z",
        top1_agreement=0.80,
        sqnr_vs_emulated_db=float("nan"),
        top1_agreement_vs_emulated=None,
    )
    found = {r.kind: r for r in build_report([old, dropped]).regressions}
    assert set(found) == {"top-1 down", "SQNR vs emulated down", "top-1 vs emulated down"}
    assert (found["top-1 down"].old, found["top-1 down"].new) == ("0.914", "0.800")
    # the history's float columns hold a missing value and NaN alike: both shown as "-"
    assert found["SQNR vs emulated down"].new == "-"
    assert found["top-1 vs emulated down"].new == "-"
    assert all("FP8_DYNAMIC" in r.nodeid for r in found.values())
    assert all(r.first_run == "dropped" for r in found.values())
    lines = "\n".join(regressions(dropped, old))
    assert "test_model_logits[llama_tiny-llmcompressor:FP8_DYNAMIC]: 0.914 -> 0.800" in lines


def test_history_keeps_the_columns_and_dates_a_regression(tmp_path: Path) -> None:
    history = open_history(tmp_path / "history")
    runs = [
        _run(tmp_path, "r1", "2026-01-01T00:00:00Z"),
        _run(tmp_path, "r2", "2026-01-02T00:00:00Z", top1_agreement=0.70),
        _run(tmp_path, "r3", "2026-01-03T00:00:00Z", top1_agreement=0.70),
    ]
    assert [o.status for o in add_runs(history, runs[:2])] == ["added", "added"]
    stored = history.load()
    logits = stored[stored["model_check"] == "logits"]
    assert set(logits["top1_agreement"].dropna()) == {0.914, 0.70}
    assert set(logits["model_preset"]) == {"FP8_DYNAMIC", "FP8_BLOCK", "FP8"}
    # a partition written before these columns existed still loads beside them
    old_frame = records_frame(json.loads(runs[0].read_text()), "r0").drop(
        columns=list(MODEL_COLUMNS)
    )
    history.add("r0", old_frame)
    assert history.load()["model"].isna().sum() >= len(old_frame)
    # r3 vs r2: no new drop; r2 vs r1, reported with the history: first seen in r2
    report = build_report([runs[1]], history=history, baseline=runs[0])
    top1 = [r for r in report.regressions if r.kind == "top-1 down"]
    assert len(top1) == 1
    assert top1[0].first_run == "r2"
    later = build_report([runs[2]], history=history)
    assert [r for r in later.regressions if r.kind == "top-1 down"] == []
    # against the older baseline, the drop is dated to where its streak began
    earlier = history.load(["r1", "r2"])
    new = load_run(runs[2]).frame
    dated = model_regressions(new, earlier[earlier["run_id"] == "r1"], earlier)
    assert {r.first_run for r in dated if r.kind == "top-1 down"} == {"r2"}


def test_model_regressions_on_frames_without_model_columns() -> None:
    empty = pd.DataFrame({"nodeid": pd.Series([], dtype="string")})
    assert model_regressions(empty, empty) == []


@pytest.mark.parametrize("metric", LOGITS_METRICS)
def test_a_non_number_model_metric_is_refused(tmp_path: Path, metric: str) -> None:
    record = _logits("m", "P", **{metric: "high"})
    path = _write(tmp_path / "bad.json", "2026-01-01T00:00:00Z", [record])
    with pytest.raises(ResultsError, match=f"metrics.{metric} must be a number"):
        read_results(path)
