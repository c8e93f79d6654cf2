"""Provenance per run: the results file and the history carry the harness's commit, the
engine's commit, plugin and engine versions and the torch/CUDA/HIP stack; a report names
what changed since the baseline, and a run without a baseline is a visible warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report.model.nightly import build_report
from harness.report.outputs.html_page import render_html
from harness.report.outputs.markdown import summary_markdown
from harness.report.reading.results import read_results, write_results
from harness.report.reading.runs import add_runs, open_history
from tests.conftest import REPO_ROOT
from tests.fleet.night import record, results_doc, write_run


def test_results_and_history_carry_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QHARNESS_ENGINE_COMMIT", "0123abcd")
    run = tmp_path / "20261201T0300Z-cpu-a1b2"
    run.mkdir()
    write_results(run / "results.json", [record("fp8_per_tensor", "emulated")], exitstatus=0)
    prov = read_results(run / "results.json")["provenance"]
    assert prov["engine_commit"] == "0123abcd"
    assert len(prov["harness_commit"]) == 40  # this checkout's git HEAD
    assert {"qharness", "plugins", "engines", "commits"} <= set(prov)
    history = open_history(tmp_path / "history")
    add_runs(history, [run])
    stored = history.load()
    assert set(stored["engine_commit"]) == {"0123abcd"}
    assert set(stored["harness_commit"]) == {prov["harness_commit"]}
    assert json.loads(stored["engine_versions"].iloc[0])["engines"] == prov["engines"]


def test_a_changed_engine_is_named_against_the_baseline(tmp_path: Path) -> None:
    history = open_history(tmp_path / "history")
    stack = {"plugins": {"qharness-vllm": "0.1"}, "engines": {"vllm": "0.8.0"}, "commits": {}}
    old = results_doc("sm_90", "2026-12-01T03:00:00Z", [record("fp8_per_tensor", "native")],
                      provenance={"harness_commit": "aaa", **stack})  # fmt: skip
    add_runs(history, [write_run(tmp_path, "20261201T0300Z-sm_90-a1b2", old)])
    stack["engines"] = {"vllm": "0.8.1"}
    new = results_doc("sm_90", "2026-12-02T03:00:00Z", [record("fp8_per_tensor", "native")],
                      provenance={"harness_commit": "bbb", **stack})  # fmt: skip
    report = build_report([write_run(tmp_path, "20261202T0300Z-sm_90-a1b2", new)], history)
    (note,) = [n for n in report.notes if "changed since baseline" in n]
    assert "harness_commit aaa -> bbb" in note
    assert "vllm 0.8.0 -> 0.8.1" in note


def test_a_missing_baseline_is_a_visible_warning(tmp_path: Path) -> None:
    doc = results_doc("gfx942", "2026-12-02T03:00:00Z", [record("fp8_per_tensor", "native")])
    run = write_run(tmp_path, "20261202T0300Z-gfx942-a1b2", doc)
    report = build_report([run], open_history(tmp_path / "history"))
    summary = summary_markdown(report)
    assert "### Warnings (1)" in summary
    assert "gfx942: no baseline" in summary
    page = render_html(report, tmp_path / "r.html")
    assert "class='warning'>warning: gfx942: no baseline" in page


@pytest.mark.parametrize("name", ["nightly-rocm.yml", "nightly-cuda.yml"])
def test_examples_keep_history_on_a_durable_branch(name: str) -> None:
    import yaml

    doc = yaml.safe_load((REPO_ROOT / "examples" / name).read_text())
    (job,) = doc["jobs"].values()
    steps = job["steps"]
    assert not [s for s in steps if "cache" in s.get("uses", "")]  # evicted after 7 days
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert 'git push origin "HEAD:$QH_HISTORY_BRANCH"' in scripts
    assert doc["env"]["QH_HISTORY_BRANCH"] == "qharness-history"
    assert job["permissions"]["contents"] == "write"


def test_the_page_shows_each_runners_stack_once_per_distinct_stack(tmp_path: Path) -> None:
    """report.html's provenance section: commits, torch, plugin and engine versions, one
    row per distinct stack, naming its runners."""
    stack = {"plugins": {"qharness-vllm": "0.1"}, "engines": {"vllm": "0.8.0"}, "commits": {}}
    runs = []
    for label, engine_commit in (("rack1", "e111"), ("rack2", "e111"), ("rack3", "e333")):
        prov = {"harness_commit": "h42", "engine_commit": engine_commit, **stack}
        records = [record("fp8_per_tensor", "native")]
        doc = results_doc("sm_90", "2026-12-02T03:00:00Z", records, label=label, provenance=prov)
        runs.append(write_run(tmp_path, f"20261202T0300Z-sm_90-{label}", doc))
    page = render_html(build_report(runs), tmp_path / "report.html")
    section = page.split("<h2>Provenance</h2>", 1)[1].split("</table>", 1)[0]
    rows = section.split("<tr>")[2:]
    assert len(rows) == 2
    assert "2: sm_90@rack1, sm_90@rack2" in rows[0]
    assert "<code>e111</code>" in rows[0]
    assert "1: sm_90@rack3" in rows[1]
    assert "<code>e333</code>" in rows[1]
    for row in rows:
        assert "<code>h42</code>" in row
        assert "engines: vllm 0.8.0; plugins: qharness-vllm 0.1" in row
