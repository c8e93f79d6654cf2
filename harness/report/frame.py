"""Results documents as tables: one row per test per run, the shape history and reports share.

Columns are `COLUMNS` (documented in docs/HISTORY.md, schema `HISTORY_SCHEMA`). Benchmarks
from pytest-benchmark's JSON become rows of suite ``benchmark`` with their mean and spread.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.models_section import MODEL_COLUMNS, model_values
from harness.report.rundir import platform_key

HISTORY_SCHEMA = "qharness.history/1"

# column -> pandas dtype; every row of every run has all of them (missing values are NA).
COLUMNS: dict[str, str] = {
    "run_id": "string",
    "created": "string",
    "platform": "string",
    "device": "string",
    "arch": "string",
    "torch_version": "string",
    "partial": "bool",
    "runner_key": "string",
    "runner_label": "string",
    "runner_host": "string",
    "cuda_version": "string",
    "hip_version": "string",
    "driver_version": "string",
    "qharness_version": "string",
    "harness_commit": "string",
    "engine_commit": "string",
    "engine_versions": "string",
    "nodeid": "string",
    "suite": "string",
    "scheme": "string",
    "path": "string",
    "shape": "string",
    "outcome": "string",
    "reason": "string",
    "kernel": "string",
    "execution": "string",  # what ran, on a simulated platform (docs/CLI.md); else null
    "duration_s": "float64",
    "sqnr_db": "float64",
    "sqnr_floor_db": "float64",
    "worst_error_to_bound": "float64",
    "peak_bytes": "float64",
    "bench_mean_s": "float64",
    "bench_stddev_s": "float64",
    **MODEL_COLUMNS,  # the model suite's case and logits metrics (models_section)
}


def _number(value: Any) -> float | None:
    """A metric as a float; NaN stays NaN (a NaN SQNR is news), non-numbers become None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def run_key(doc: dict[str, Any]) -> str:
    """The runner key of a results document (`harness.platform.runner`): the platform key,
    plus ``@label`` when the runner has a label. Derived from the platform fields, never
    taken from ``runner.key``, so a file whose platform was rewritten cannot disagree."""
    runner = doc.get("runner")
    label = runner.get("label") if isinstance(runner, dict) else None
    platform = platform_key(doc.get("platform") or {})
    return f"{platform}@{label}" if isinstance(label, str) and label else platform


def run_columns(doc: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The columns every row of one run shares."""
    platform = doc.get("platform") or {}
    found = doc.get("runner")
    runner: dict[str, Any] = found if isinstance(found, dict) else {}
    return {
        "run_id": run_id,
        "created": _text(doc.get("created")),
        "platform": platform_key(platform),
        "device": _text(platform.get("device")),
        "arch": _text(platform.get("arch")),
        "torch_version": _text(platform.get("torch_version")),
        "partial": bool(doc.get("partial", False)),
        "runner_key": run_key(doc),
        "runner_label": _text(runner.get("label")),
        "runner_host": _text(runner.get("host")),
        "cuda_version": _text(platform.get("cuda_version")),
        "hip_version": _text(platform.get("hip_version")),
        "driver_version": _text(runner.get("driver")),
        **provenance_columns(doc),
    }


def provenance_columns(doc: dict[str, Any]) -> dict[str, Any]:
    """The run's provenance (`harness.report.provenance`): qharness version, commits, and the
    plugin and engine versions as one JSON text (``{"plugins": ..., "engines": ...,
    "commits": ...}``, keys sorted, so equal stacks give equal text)."""
    found = doc.get("provenance")
    prov: dict[str, Any] = found if isinstance(found, dict) else {}
    versions = doc.get("versions") if isinstance(doc.get("versions"), dict) else {}
    stack = {k: prov[k] for k in ("plugins", "engines", "commits") if isinstance(prov.get(k), dict)}
    return {
        "qharness_version": _text(prov.get("qharness") or (versions or {}).get("qharness")),
        "harness_commit": _text(prov.get("harness_commit")),
        "engine_commit": _text(prov.get("engine_commit")),
        "engine_versions": json.dumps(stack, sort_keys=True) if stack else None,
    }


def records_frame(doc: dict[str, Any], run_id: str) -> pd.DataFrame:
    """One row per record of a (validated) results document."""
    return typed(pd.DataFrame(record_rows(doc, run_id), columns=list(COLUMNS)))


def record_rows(doc: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The rows of `records_frame` as plain dictionaries (many runs make one frame)."""
    run = run_columns(doc, run_id)
    rows = []
    for r in doc.get("records") or []:
        metrics = r.get("metrics") or {}
        rows.append(
            {
                **run,
                "nodeid": _text(r.get("nodeid")),
                "suite": _text(r.get("suite")) or "other",
                "scheme": _text(r.get("scheme")),
                "path": _text(r.get("path")),
                "shape": _text(r.get("shape")),
                "outcome": _text(r.get("outcome")),
                "reason": _text(r.get("reason")),
                "kernel": _text(metrics.get("kernel")),
                "execution": _text(r.get("execution")),
                "duration_s": _number(r.get("duration_s")),
                "sqnr_db": _number(metrics.get("sqnr_db")),
                "sqnr_floor_db": _number(metrics.get("sqnr_floor_db")),
                "worst_error_to_bound": _number(metrics.get("worst_error_to_bound")),
                "peak_bytes": _number(metrics.get("peak_bytes")),
                **model_values(metrics),
            }
        )
    return rows


def benchmark_frame(path: Path, run: dict[str, Any]) -> pd.DataFrame:
    """Rows for pytest-benchmark's ``--benchmark-json`` file; ``run`` gives the run columns."""
    return typed(pd.DataFrame(benchmark_rows(path, run), columns=list(COLUMNS)))


def benchmark_rows(path: Path, run: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of `benchmark_frame` as plain dictionaries."""
    doc = json.loads(Path(path).read_text())
    rows = []
    for bench in doc.get("benchmarks") or []:
        stats = bench.get("stats") or {}
        params = bench.get("params") or {}
        mean = _number(stats.get("mean"))
        if mean is None or not math.isfinite(mean):
            continue
        rows.append(
            {
                **run,
                "nodeid": _text(bench.get("fullname") or bench.get("name")),
                "suite": "benchmark",
                "scheme": _text(params.get("scheme_name")),
                "path": _text(params.get("path_name")),
                "outcome": "passed",
                "bench_mean_s": mean,
                "bench_stddev_s": _number(stats.get("stddev")),
            }
        )
    return rows


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with exactly `COLUMNS`, in order, with their dtypes."""
    for column in COLUMNS:
        if column not in frame:
            frame[column] = None
    frame = frame[list(COLUMNS)]
    return frame.astype({c: t for c, t in COLUMNS.items() if c != "partial"}).astype(
        {"partial": "bool"}
    )
