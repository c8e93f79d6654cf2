"""A simulated column says what ran: interpreted GPU kernel source, CPU code under the
arch's expectations, or nothing (the records' ``execution``, harness.paths.execution).

Under ``--simulate triton-interpret:gfx942`` a plain-torch plugin's pass is CPU code, not
the arch's kernel; a path that supports nothing there ran nothing, which no native kernel
was expected to replace ("emulated-only" claimed one was).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.report.model.matrix import build_matrix
from harness.report.model.nightly import build_report
from harness.report.outputs.html_page import render_html
from harness.report.outputs.markdown import full_markdown, summary_markdown
from harness.report.outputs.text import render_report
from harness.report.reading.frame import records_frame
from harness.report.reading.results import SCHEMA, results_problem, summarize
from tests.fleet.night import record, results_doc, write_run

KEY = "triton-interpret-gfx942"
SIMULATED = {
    "device": "cpu", "arch": "gfx942", "name": "triton-interpret simulating gfx942 (MI300X)",
    "torch_version": "2.7.0+cpu", "cuda_version": None, "hip_version": None,
    "is_cuda_alike": False, "fp8_format": "e4m3fnuz", "fp8_dtype": "float8_e4m3fnuz",
    "simulated": "triton-interpret", "platform_key": KEY,
}  # fmt: skip
CPU = "CPU code under the arch's expectations"
INTERPRETED = "GPU kernel source, interpreted"


def _ran(scheme: str, path: str, outcome: str, execution: str, n: int = 0) -> dict[str, Any]:
    r = record(scheme, path, outcome)
    r["nodeid"] = r["nodeid"].replace("1x16x256", f"{n + 1}x16x256")
    r["execution"] = execution
    if outcome == "skipped":
        r["reason"] = f"{path}: no kernel for {scheme}"
    return r


# a night under --simulate: the reference, a plain-torch plugin, a plugin that supports
# nothing, a Triton path, and one whose tests ran both (two kinds in one cell)
RECORDS = [
    _ran("fp8_per_tensor", "emulated", "passed", "cpu-code"),
    _ran("fp8_per_tensor", "vendor_torch", "passed", "cpu-code"),
    _ran("fp8_per_tensor", "vendor_torch", "skipped", "not-run", 1),
    _ran("fp8_per_tensor", "vendor_unsupported", "skipped", "not-run"),
    _ran("fp8_per_tensor", "vendor_triton", "passed", "interpreted-kernel"),
    _ran("fp8_per_tensor", "vendor_both", "passed", "interpreted-kernel"),
    _ran("fp8_per_tensor", "vendor_both", "passed", "cpu-code", 1),
]


def _doc(records: list[dict[str, Any]]) -> dict[str, Any]:
    doc = {
        "schema": SCHEMA, "created": "2026-12-02T03:00:00Z", "exitstatus": 0,
        "partial": False, "platform": SIMULATED,
        "versions": {"qharness": "0.1.0", "torch": "2.7.0+cpu"},
        "summary": summarize(records), "records": records,
    }  # fmt: skip
    assert results_problem(doc) is None, results_problem(doc)
    return doc


@pytest.fixture
def simulated_run(tmp_path: Path) -> Path:
    return write_run(tmp_path, f"20261202T0300Z-{KEY}-a1b2", _doc(RECORDS))


def test_the_simulated_column_says_what_ran(simulated_run: Path) -> None:
    cells = {path: c[KEY] for (_, path), c in build_report([simulated_run]).matrix.items()}
    heads = {path: cell.head for path, cell in cells.items()}
    assert heads == {
        "emulated": f"pass, {CPU}",
        "vendor_torch": f"pass (1 skipped), {CPU}",
        "vendor_unsupported": "not run (unsupported)",
        "vendor_triton": f"pass, {INTERPRETED}",
        "vendor_both": f"pass, {CPU} (1), {INTERPRETED} (1)",
    }
    assert cells["vendor_unsupported"].verdict == "skipped"  # never "emulated-only"
    assert cells["vendor_unsupported"].reason == "vendor_unsupported: no kernel for fp8_per_tensor"


def test_a_frame_of_the_run_gives_the_same_cells(simulated_run: Path) -> None:
    doc = json.loads((simulated_run / "results.json").read_text())
    from_frame = build_matrix(records_frame(doc, simulated_run.name))
    from_digest = build_report([simulated_run]).matrix
    assert {k: c[KEY].head for k, c in from_frame.items()} == {
        k: c[KEY].head for k, c in from_digest.items()
    }


def test_real_hardware_columns_keep_emulated_only(tmp_path: Path) -> None:
    """Records without ``execution`` (a GPU's) are judged as before."""
    records = [
        record("fp8_per_tensor", "emulated"),
        record("fp8_per_tensor", "vendor_unsupported", "skipped"),
    ]
    run = write_run(tmp_path, "20261202T0300Z-gfx942-a1b2", results_doc("gfx942", "x", records))
    cell = build_report([run]).matrix[("fp8_per_tensor", "vendor_unsupported")]["gfx942"]
    assert (cell.verdict, cell.head) == ("emulated-only", "emulated-only")


def test_the_summaries_count_what_ran(simulated_run: Path) -> None:
    report = build_report([simulated_run])
    expected = f"- simulated {KEY}: 2 {INTERPRETED}, 3 {CPU}, 2 nothing ran"
    summary = summary_markdown(report)
    assert expected in summary
    full = full_markdown(report)
    assert expected in full
    assert "| not run (unsupported) |" in full


def test_the_html_cell_of_cpu_code_is_marked_apart(simulated_run: Path, tmp_path: Path) -> None:
    page = render_html(build_report([simulated_run]), tmp_path / "report.html")
    assert f'<td class="cell pass cpu-code">pass, {CPU}' in page.replace("&#x27;", "'")
    assert f'<td class="cell pass">pass, {INTERPRETED}' in page
    assert (
        '<td class="cell skipped" title="vendor_unsupported: no kernel for fp8_per_tensor">'
        "not run (unsupported)" in page
    )


@pytest.mark.parametrize("value", ["gpu", "", 1, "CPU-CODE"])
def test_an_unknown_execution_is_refused_naming_the_field(value: object) -> None:
    bad = _ran("fp8_per_tensor", "emulated", "passed", "cpu-code")
    bad["execution"] = value
    problem = results_problem({**_doc([]), "records": [bad]})
    assert problem is not None
    assert problem.startswith("records[0].execution must be one of interpreted-kernel, "), problem


def test_the_text_report_of_a_run_counts_what_each_path_ran(simulated_run: Path) -> None:
    """`report --results` and what `run` prints: a table of what each path ran."""
    text = render_report(simulated_run / "results.json")
    section = text.split("## What ran on this simulated platform (tests)\n", 1)[1]
    table = section.split("\n## ", 1)[0]
    header = next(line for line in table.splitlines() if line.startswith("execution"))
    # pandas orders the columns by name: CPU code, GPU kernel source, nothing ran
    assert header.index(CPU) < header.index(INTERPRETED) < header.index("nothing ran")
    counts = {
        line.split()[-4].replace("\\", ""): [int(n) for n in line.split()[-3:]]
        for line in table.splitlines()
        if "vendor" in line or "emulated" in line
    }
    assert counts == {
        "emulated": [1, 0, 0],
        "vendor_both": [1, 1, 0],
        "vendor_torch": [1, 0, 1],
        "vendor_triton": [0, 1, 0],
        "vendor_unsupported": [0, 0, 1],
    }


def test_the_text_report_of_real_hardware_has_no_such_table(tmp_path: Path) -> None:
    run = write_run(
        tmp_path, "r", results_doc("gfx942", "x", [record("fp8_per_tensor", "emulated")])
    )
    assert "What ran" not in render_report(run / "results.json")
