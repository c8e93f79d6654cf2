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

from harness.report.reading.rundir import platform_key
from harness.report.reading.schema import as_number, as_text, history_columns, record_values

HISTORY_SCHEMA = "qharness.history/1"

# column -> pandas dtype; every row of every run has all of them (missing values are NA).
COLUMNS: dict[str, str] = history_columns()  # the field table's (harness.report.reading.schema)


_number = as_number
_text = as_text


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
    """The run's provenance (`harness.report.reading.provenance`): qharness version, commits,
    and the plugin and engine versions as one JSON text (``{"plugins": ..., "engines": ...,
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
        # the table's record and metric fields; a record with no suite is ``other``
        rows.append({**run, **record_values(r), "suite": _text(r.get("suite")) or "other"})
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
