"""The field table (harness/report/reading/schema.py) is what validation, the history and the
docs read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from harness.report.model import models_section
from harness.report.model.regress import find_regressions
from harness.report.outputs import doc_facts
from harness.report.reading import frame, results
from harness.report.reading.schema import FIELDS, Field, history_columns, markdown_columns
from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]

# Adds one row to the table before anything reads it, then shows where the field went.
NEW_FIELD = textwrap.dedent(
    """
    import harness.report.reading.schema as schema
    schema.FIELDS = (*schema.FIELDS, schema.Field(
        "widget_bytes", "metric", "float64", "count", "bytes of widgets", read=schema.as_number,
        regresses="rise", threshold=schema.Threshold("widgets up", 0.5, relative=True)))
    from harness.report.reading.frame import COLUMNS, records_frame
    from harness.report.reading.results import checks_markdown, results_problem

    def doc(value):
        record = {"nodeid": "t::a", "outcome": "passed", "metrics": {"widget_bytes": value}}
        platform = {"device": "cpu", "arch": "cpu", "name": "cpu", "torch_version": "2"}
        return {"schema": "qharness.results/1", "created": "2026-01-01T00:00:00Z",
                "exitstatus": 0, "platform": platform, "records": [record]}

    print(COLUMNS["widget_bytes"])
    print(results_problem(doc(-1)))
    print(results_problem(doc("many")))
    print(results_problem(doc(12)))
    table = records_frame(doc(12), "r1")
    print(table["widget_bytes"].dtype, table["widget_bytes"].iloc[0])
    print("`widget_bytes`" in schema.markdown_columns(schema.FIELDS))
    print("`widget_bytes`: a count from 0 to 2^63-1 or null" in checks_markdown())
    from harness.report.model.regress import find_regressions

    def run(value, run_id):
        return records_frame(doc(value), run_id)

    print([(r.kind, r.old, r.new) for r in find_regressions(run(151, "r2"), run(100, "r1"))])
    print(find_regressions(run(149, "r2"), run(100, "r1")))
    """
)


def test_a_field_added_to_the_table_is_validated_stored_and_documented() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NEW_FIELD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "float64",
        "records[0].metrics.widget_bytes must be a count from 0 to 9223372036854775807 "
        "(int64) or null, got -1",
        "records[0].metrics.widget_bytes must be a number or null, got 'many'",
        "None",
        "float64 12.0",
        "True",
        "True",
        "[('widgets up', '100.00', '151.00')]",  # past its row's threshold: 1.5 x 100
        "[]",
    ]


def test_the_history_columns_are_the_tables() -> None:
    assert history_columns() == frame.COLUMNS
    run_fields = {f.name for f in FIELDS if f.where == "run"}
    doc = {"platform": {"device": "cpu", "arch": "cpu"}, "records": []}
    assert set(frame.run_columns(doc, "r1")) == run_fields
    # what a record fills: every column of the table's record and metric rows
    record = {"nodeid": "t::a", "outcome": "passed", "metrics": {}}
    (row,) = frame.record_rows({**doc, "records": [record]}, "r1")
    expected = {f.name for f in FIELDS if f.dtype and f.where in ("run", "record", "metric")}
    assert set(row) == expected


def test_validation_and_the_model_section_read_the_table() -> None:
    counts = {f.name for f in FIELDS if f.where == "metric" and f.json == "count"}
    assert set(results.COUNT_METRICS) == counts
    assert set(models_section.MODEL_COLUMNS) == {f.name for f in FIELDS if f.group == "model"}
    # the model section's regression rules flag a fall of exactly the table's falling fields
    falling = {f.name for f in FIELDS if f.group == "model" and f.regresses == "fall"}
    assert {rule.column for rule in models_section.MODEL_RULES} == falling


def test_the_docs_column_table_is_generated_from_the_table() -> None:
    assert "docs/HISTORY.md" in doc_facts.DOCUMENTS
    text = (ROOT / "docs" / "HISTORY.md").read_text()
    assert f"<!-- facts:history-columns -->\n{markdown_columns()}\n<!-- /facts -->" in text
    for name in history_columns():
        assert f"| `{name}` |" in text
    cli = (ROOT / "docs" / "CLI.md").read_text()
    assert f"<!-- facts:record-checks -->\n{results.checks_markdown()}\n<!-- /facts -->" in cli
    for field in (*results.RECORD_FIELDS, *results.METRIC_FIELDS):
        assert f"`{field.source}`" in results.checks_markdown()


def _one_row(column: str, value: float, run_id: str) -> pd.DataFrame:
    row = {"run_id": run_id, "platform": "cpu", "nodeid": "t::a", "outcome": "passed"}
    row |= {"suite": "linear", "path": "native", column: value}
    if column.startswith("bench_"):
        row |= {"suite": "benchmark", "bench_stddev_s": 0.001}
    return frame.typed(pd.DataFrame([row], columns=list(frame.COLUMNS)))


@pytest.mark.parametrize(
    "field", [f for f in FIELDS if f.regresses and f.group != "model"], ids=lambda f: f.name
)
def test_the_report_flags_each_field_the_way_the_table_says_it_regresses(field: Field) -> None:
    better, worse = (1.0, 1000.0) if field.regresses == "rise" else (1000.0, 1.0)
    old = _one_row(field.name, better, "r1")
    assert find_regressions(_one_row(field.name, worse, "r2"), old) != []
    improved = better * (0.999 if field.regresses == "rise" else 1.001)
    assert find_regressions(_one_row(field.name, improved, "r2"), old) == []


def test_a_record_with_several_faults_is_named_by_its_reason_first() -> None:
    platform = {"device": "cpu", "arch": "cpu", "name": "cpu", "torch_version": "2"}
    record = {"nodeid": "t::a", "outcome": "passed", "suite": 4, "reason": 3, "duration_s": "x"}
    doc = {"schema": "qharness.results/1", "created": "x", "exitstatus": 0}
    problem = results.results_problem({**doc, "platform": platform, "records": [record]})
    assert problem == "records[0].reason must be a string or null, got 3"


def test_regression_merge_reads_the_schema_regressing_fields() -> None:
    """regress.py compares exactly the history fields the schema marks ``regresses`` (plus
    its state and companion columns), and each of them is a history column."""
    from harness.report.model.regress import COMPANION_COLUMNS, STATE_COLUMNS, compared_columns
    from harness.report.reading.frame import COLUMNS
    from harness.report.reading.schema import FIELDS

    marked = {f.name for f in FIELDS if f.regresses is not None and f.dtype is not None}
    cols = compared_columns()
    assert marked == set(cols) - set(STATE_COLUMNS) - set(COMPANION_COLUMNS)
    assert {"sqnr_db", "worst_error_to_bound", "peak_bytes", "bench_mean_s"} <= marked
    assert set(cols) <= set(COLUMNS)
    assert len(cols) == len(set(cols))
