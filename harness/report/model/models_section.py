"""The model section of the reports, and its regressions: what a user's model gets from vLLM.

The model suite (suites/test_models.py, docs/MODELS.md) records on every test its case
(metrics ``model``, ``tool``, ``preset`` and ``model_check``: which of the suite's tests it
is), and on the logits test the quality of vLLM's logits (`LOGITS_METRICS`). All are optional
fields of the results record (schema ``qharness.results/1``: added, nothing changed); the
history keeps them as the columns `MODEL_COLUMNS` (schema ``qharness.history/1``: new
columns, missing ones read as null), so the nightly report compares them run to run.

This module is the one place that knows them: `model_values` (a record's metrics as those
columns, the frame's hook), `model_rows` (one row per platform x model x tool x preset,
with the logits metrics and the outcomes of the per-layer tests), the three renderings
(`models_markdown`, `models_text`, `models_html`) and `model_regressions`. The renderers of
the reports call these and nothing else of it.

Regression rules (`MODEL_RULES`), beside the generic ``SQNR down`` that already applies to
the logits test's ``sqnr_db`` (against the unquantized model):

- ``SQNR vs emulated down``: vLLM's logits moved away from the harness's emulation of the
  same checkpoint by more than `harness.report.model.regress.SQNR_DROP_DB` (the models, prompts and
  calibration are seeded, so on one platform the value moves only when numerics change);
- ``top-1 down`` / ``top-1 vs emulated down``: the fraction of positions whose argmax agrees
  fell by more than `TOP1_DROP`. The tiny models have random weights and small logit margins
  (docs/MODELS.md: 0.88-0.98 agreement on 128 positions), so a change of accumulation order
  flips a few near-ties; 0.05 is more than six of 128 positions.

A value that becomes NaN (or disappears from a test that ran) is a regression too.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from harness.report.model.escape import html_text, md_inline
from harness.report.model.regress import RAN_OK, SQNR_DROP_DB, Regression
from harness.report.reading.plain import plain, plain_rows
from harness.report.reading.schema import FIELDS, history_columns, record_values

TOP1_DROP = 0.05
SUITE = "models"
LOGITS_CHECK = "logits"  # ``model_check`` of the logits test; its record holds the metrics

_FIELDS = tuple(f for f in FIELDS if f.group == "model")  # the table's model-suite rows
# history column -> the record's metric it comes from (text case fields)
TEXT_FIELDS: dict[str, str] = {f.name: f.source for f in _FIELDS if f.dtype == "string"}
# history column (= the record's metric name) of each logits metric, besides ``sqnr_db``
LOGITS_METRICS: tuple[str, ...] = tuple(f.name for f in _FIELDS if f.dtype == "float64")
# what the results validator holds to "a number or null"
NUMERIC_METRICS: tuple[str, ...] = tuple(f.name for f in _FIELDS if f.json == "number")
MODEL_COLUMNS: dict[str, str] = history_columns(_FIELDS)


def model_values(metrics: dict[str, Any]) -> dict[str, Any]:
    """A record's metrics as the `MODEL_COLUMNS` (None where absent or of the wrong type)."""
    return record_values({"metrics": metrics}, _FIELDS)


@dataclass(frozen=True)
class ModelRow:
    """One model x tool x preset on one platform: its logits test and its layer tests."""

    platform: str
    model: str
    tool: str
    preset: str
    scheme: str | None = None
    outcome: str | None = None  # the logits test's; None when the run has no such test
    reason: str | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)  # sqnr_db, LOGITS_METRICS
    layers: dict[str, int] = field(default_factory=dict)  # outcome -> count of layer tests

    @property
    def recipe(self) -> str:
        return f"{self.tool}:{self.preset}"


def _columns_present(frame: pd.DataFrame) -> bool:
    return all(c in frame for c in ("model", "model_tool", "model_preset", "model_check"))


def model_rows(frame: pd.DataFrame) -> list[ModelRow]:
    """The model rows of a report frame (`harness.report.reading.frame` columns), sorted."""
    if frame.empty or not _columns_present(frame):
        return []
    tests = frame[frame["model"].notna() & frame["model_check"].notna()]
    if tests.empty:
        return []
    columns = ["platform", "model", "model_tool", "model_preset", "model_check", "scheme"]
    columns += ["outcome", "reason", "sqnr_db", *LOGITS_METRICS]
    found: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for row in plain_rows(tests, columns):
        key = (
            str(row["platform"] or "-"),
            str(row["model"]),
            str(row["model_tool"] or "-"),
            str(row["model_preset"] or "-"),
        )
        entry = found.setdefault(key, {"layers": Counter()})
        if row["model_check"] == LOGITS_CHECK:
            entry |= {
                "scheme": row["scheme"],
                "outcome": row["outcome"],
                "reason": row["reason"],
                "metrics": {m: row[m] for m in ("sqnr_db", *LOGITS_METRICS)},
            }
        elif row["model_check"] in LAYER_CHECKS:
            entry["layers"][row["outcome"]] += 1
            entry.setdefault("scheme", row["scheme"])
    return [
        ModelRow(
            *key,
            scheme=e.get("scheme"),
            outcome=e.get("outcome"),
            reason=e.get("reason"),
            metrics=e.get("metrics", {}),
            layers=dict(e["layers"]),
        )
        for key, e in sorted(found.items())
    ]


# the suite's per-layer tests (``model_check`` values) whose outcomes a row counts
LAYER_CHECKS = frozenset({"checkpoint_files", "moe_checkpoint", "layer_loading", "layer_output"})


# ------------------------------------------------------------------------------ renderings
def _db(value: float | None) -> str:
    if value is None:
        return "-"
    return "NaN" if math.isnan(value) else f"{value:.1f} dB"


def _fraction(value: float | None) -> str:
    if value is None:
        return "-"
    return "NaN" if math.isnan(value) else f"{value:.3f}"


def _layers(counts: dict[str, int]) -> str:
    if not counts:
        return "-"
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    return ", ".join(f"{counts[o]} {o}" for o in order if counts.get(o))


def _cells(row: ModelRow) -> list[str]:
    """The table's cells of one row, as plain text (each renderer escapes them)."""
    m = row.metrics
    logits = row.outcome or "not run"
    return [
        row.platform,
        row.model,
        row.recipe,
        row.scheme or "-",
        logits,
        _db(m.get("sqnr_db")),
        _fraction(m.get("top1_agreement")),
        _db(m.get("sqnr_vs_emulated_db")),
        _fraction(m.get("top1_agreement_vs_emulated")),
        f"{_db(m.get('emulated_sqnr_db'))}, {_fraction(m.get('emulated_top1_agreement'))}",
        _layers(row.layers),
    ]


HEADER = (
    "platform",
    "model",
    "tool:preset",
    "scheme",
    "logits test",
    "SQNR vs float",
    "top-1 vs float",
    "SQNR vs emulated",
    "top-1 vs emulated",
    "emulated vs float",
    "layer tests",
)
NOTE = (
    "vLLM's logits against the unquantized model and against the harness's emulated forward "
    "of the same checkpoint (docs/MODELS.md); a skipped logits test gives its reason below."
)


def _skipped(rows: Iterable[ModelRow]) -> list[ModelRow]:
    return [r for r in rows if r.outcome not in (None, *RAN_OK) and r.reason]


def models_markdown(rows: list[ModelRow], heading: str = "##") -> list[str]:
    """The section as Markdown lines; no lines when the runs hold no model tests."""
    if not rows:
        return []
    lines = ["", f"{heading} Models: vLLM logits per model x tool x preset ({len(rows)})", ""]
    lines += [NOTE, ""]
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for row in rows:
        lines.append("| " + " | ".join(md_inline(c) for c in _cells(row)) + " |")
    for row in _skipped(rows):
        lines.append(
            f"- {md_inline(row.model)} {md_inline(row.recipe)}: {row.outcome}: "
            f"{md_inline(row.reason, 400)}"
        )
    return lines


def models_text(rows: list[ModelRow]) -> list[str]:
    """The section for the text report (`report --results`): the Markdown table."""
    return models_markdown(rows)


def models_html(rows: list[ModelRow]) -> str:
    """The section as HTML (empty when the runs hold no model tests)."""
    if not rows:
        return ""
    head = "".join(f"<th>{html_text(h)}</th>" for h in HEADER)
    body = []
    for row in rows:
        tds = "".join(f"<td>{html_text(c)}</td>" for c in _cells(row))
        title = f' title="{html_text(row.reason, 300)}"' if row.reason else ""
        body.append(f"<tr{title}>{tds}</tr>")
    return (
        f"<h2>Models: vLLM logits per model x tool x preset ({len(rows)})</h2>"
        f"<p class='muted'>{html_text(NOTE)}</p>"
        f"<table><tr>{head}</tr>{''.join(body)}</table>"
    )


# ----------------------------------------------------------------------------- regressions
@dataclass(frozen=True)
class ModelRule:
    kind: str
    column: str
    drop: float
    unit: str


MODEL_RULES: tuple[ModelRule, ...] = (
    ModelRule("SQNR vs emulated down", "sqnr_vs_emulated_db", SQNR_DROP_DB, " dB"),
    ModelRule("top-1 down", "top1_agreement", TOP1_DROP, ""),
    ModelRule("top-1 vs emulated down", "top1_agreement_vs_emulated", TOP1_DROP, ""),
)


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "NaN"
    return f"{value:.2f}{unit}" if unit else f"{value:.3f}"


def _regressed(value: Any, old: float, rule: ModelRule) -> bool:
    value = plain(value)
    return value is None or math.isnan(float(value)) or float(value) < old - rule.drop


def _logits_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty or not _columns_present(frame) or "outcome" not in frame:
        return frame.iloc[0:0]
    is_logits = frame["model_check"].eq(LOGITS_CHECK).fillna(False).astype(bool)
    return frame[is_logits].drop_duplicates("nodeid")


def model_regressions(
    new: pd.DataFrame, old: pd.DataFrame, history: pd.DataFrame | None = None
) -> list[Regression]:
    """`MODEL_RULES` applied to run ``new`` against run ``old`` (report frames); ``history``:
    earlier rows of the platform, for where each regression first appeared."""
    new_rows, old_rows = _logits_rows(new), _logits_rows(old)
    if new_rows.empty or old_rows.empty:
        return []
    run_id = str(new["run_id"].iloc[0])
    platform = str(new["platform"].iloc[0])
    before = {r["nodeid"]: r for r in plain_rows(old_rows, ["nodeid", *LOGITS_METRICS])}
    found = []
    for row in plain_rows(new_rows, ["nodeid", "outcome", *LOGITS_METRICS]):
        was = before.get(row["nodeid"])
        if was is None or row["outcome"] not in (*RAN_OK, "failed", "error"):
            continue  # a skipped test has no metrics; ran -> skipped is regress's rule
        for rule in MODEL_RULES:
            old_value = was[rule.column]
            if old_value is None or not math.isfinite(old_value):
                continue
            if _regressed(row[rule.column], old_value, rule):
                found.append(
                    Regression(
                        platform,
                        row["nodeid"],
                        rule.kind,
                        _show(old_value, rule.unit),
                        _show(row[rule.column], rule.unit),
                        run_id,
                        _first_run(history, new, row["nodeid"], rule, old_value),
                    )
                )
    return found


def _first_run(
    history: pd.DataFrame | None, new: pd.DataFrame, nodeid: str, rule: ModelRule, old: float
) -> str:
    """The earliest run of the trailing streak of runs where the regressed state holds."""
    run_id = str(new["run_id"].iloc[0])
    if history is None or history.empty or rule.column not in history:
        return run_id
    rows = pd.concat([history[history["nodeid"] == nodeid], new[new["nodeid"] == nodeid]])
    rows = rows.sort_values(["created", "run_id"], kind="stable")
    first = run_id
    for row in reversed(plain_rows(rows, ["run_id", rule.column])):
        if not _regressed(row[rule.column], old, rule):
            break
        first = str(row["run_id"])
    return first
