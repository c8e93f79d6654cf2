"""The results file: one JSON document per run, the input of reports.

Schema ``qharness.results/1`` (documented in docs/CLI.md):
``{"schema", "created", "exitstatus", "platform", "versions", "runner", "provenance",
"summary", "records": [...]}`` (``runner`` and ``provenance``, added later, are optional to
readers)
where each record has ``nodeid, suite, scheme, path, shape, ..., outcome, reason,
duration_s, metrics`` and, on a simulated platform, ``execution`` (what ran: one of
`harness.platform.simulate.EXECUTIONS`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from harness.core.files import UnreadableFileError, read_regular_file
from harness.errors import QHarnessError, filesystem_fault
from harness.report.reading.limits import (
    json_decoder,
    path_problem,
    value_problem,
    writable,
)
from harness.report.reading.schema import checked, json_problem
from harness.store.atomic import write_text_atomic
from harness.version import __version__

SCHEMA = "qharness.results/1"


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(r["outcome"] for r in records)
    skips = Counter(r["reason"] for r in records if r["outcome"] == "skipped")
    return {
        "total": len(records),
        "outcomes": dict(sorted(outcomes.items())),
        "skip_reasons": dict(skips.most_common()),
    }


INTERRUPTED = 2  # pytest's ExitCode.INTERRUPTED: Ctrl-C, or SIGTERM turned into one by the plugin


def rescue_path(path: Path) -> Path:
    """Where results go when the file system refuses ``path``: the temporary directory."""
    path = Path(path)
    return Path(tempfile.gettempdir()) / "qharness-rescued" / f"{path.parent.name}-{path.name}"


def write_results(
    path: Path, records: list[dict[str, Any]], exitstatus: int, partial: bool | None = None
) -> Path:
    """Write the results file atomically; returns where it went. ``partial`` (default: the
    run was interrupted) marks a file holding only the tests that finished; history and
    reports treat it so. A run's finished tests are never lost to a file-system fault
    (read-only or full run directory): they go to `rescue_path`, and a line says so."""
    import torch  # here, not at the top: reading results (a fleet's report) needs no torch

    from harness.platform.capabilities import capabilities
    from harness.platform.info import detect
    from harness.platform.runner import runner_identity
    from harness.report.reading.provenance import collect_provenance
    from harness.report.reading.rundir import host_tag

    platform = detect()
    runner = {**runner_identity(platform.to_json(), os.environ), "host": host_tag()}
    doc = {
        "schema": SCHEMA,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "exitstatus": exitstatus,
        "partial": exitstatus == INTERRUPTED if partial is None else partial,
        "platform": platform.to_json(),
        "capabilities": {
            name: {"available": c.available, "detail": c.detail}
            for name, c in capabilities(platform).items()
        },
        "versions": {"qharness": __version__, "torch": torch.__version__},
        "runner": runner,
        "provenance": collect_provenance(),
        "summary": summarize(records),
        "records": sorted(records, key=lambda r: str(r["nodeid"])),
    }
    # what is written reads back: a lone surrogate (see `writable`) would make it refused
    text = json.dumps(writable(doc), indent=1, sort_keys=True, default=str) + "\n"
    try:
        write_text_atomic(path, text)
        return Path(path)
    except OSError as exc:
        fault = filesystem_fault(exc)
        if fault is None:
            raise
        kept = rescue_path(path)
        write_text_atomic(kept, text)
        print(f"qharness: {fault}; the results are kept in {kept}", file=sys.stderr)
        return kept


class ResultsError(QHarnessError):
    """A results file that is missing or malformed; the message names the file and field."""


OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
# The record's own fields checked generically (nodeid and outcome have their own checks);
# ``reason`` first, so a record with several faults is named as it always was.
RECORD_FIELDS = tuple(
    sorted(
        (f for f in checked("record") if f.name not in ("nodeid", "outcome")),
        key=lambda f: f.name != "reason",
    )
)
METRIC_FIELDS = checked("metric")  # the rest of a record's metrics are free-form
# Metrics the report compares numerically (`harness.report.reading.schema`: a number or a count).
NUMERIC_METRICS = tuple(f.source for f in METRIC_FIELDS if f.json in ("number", "count"))
# Metrics that count something (bytes): finite and non-negative. SQNR may be inf (exact).
COUNT_METRICS = tuple(f.source for f in METRIC_FIELDS if f.json == "count")
_HOLDS = {"string": "a string or null", "number": "a number or null"}
_HOLDS["count"] = "a count from 0 to 2^63-1 or null"


def checks_markdown() -> str:
    """docs/CLI.md's list of what `RECORD_FIELDS` and `METRIC_FIELDS` are held to (a
    generated block of `harness.report.outputs.doc_facts`)."""
    lines = []
    for label, fields in (("record", RECORD_FIELDS), ("`metrics`", METRIC_FIELDS)):
        parts = []
        for kind, holds in _HOLDS.items():
            names = [f"`{f.source}`" for f in fields if f.json == kind]
            if names:
                parts.append(f"{', '.join(names)}: {holds}")
        lines.append(f"- {label}: {'; '.join(parts)}")
    return "\n".join(lines)


PLATFORM_FIELDS = ("device", "arch", "name", "torch_version")


def read_results(path: Path) -> dict[str, Any]:
    """The parsed, validated results document; any problem is one `ResultsError` line naming
    the file and the field (never a traceback from deep inside the report)."""
    unnamed = path_problem(Path(path))
    if unnamed:
        raise ResultsError(f"results file: {unnamed}")
    try:
        raw = read_regular_file(path, "results file")
    except UnreadableFileError as exc:
        hint = "; run `python -m harness run`" if not Path(path).exists() else ""
        raise ResultsError(f"{exc}{hint}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(
            f"results file {path} is not UTF-8 (byte {exc.start}: {raw[exc.start : exc.end]!r})"
        ) from None
    try:
        doc = json_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"results file {path} is not valid JSON ({exc})") from None
    except RecursionError:
        raise ResultsError(
            f"results file {path} is nested too deeply to be a results file"
        ) from None
    problem = results_problem(doc)
    if problem:
        raise ResultsError(f"results file {path}: {problem}")
    return dict(doc)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def results_problem(doc: Any) -> str | None:
    """What is wrong with a parsed results document, naming the field; None when valid."""
    if not isinstance(doc, dict):
        return f"the document must be a JSON object, got {type(doc).__name__}"
    for name, value in doc.items():
        if name != "records":  # each record is checked below, with its own fields
            problem = value_problem(value, name)
            if problem:
                return f"field {problem}"
    if doc.get("schema") != SCHEMA:
        return f"schema {_show(doc.get('schema'))}, expected {SCHEMA!r}"
    if not isinstance(doc.get("created"), str):
        return f"field 'created' must be a string, got {_show(doc.get('created'))}"
    status = doc.get("exitstatus")
    if not isinstance(status, int) or isinstance(status, bool):
        return f"field 'exitstatus' must be an integer, got {_show(status)}"
    platform = doc.get("platform")
    if not isinstance(platform, dict):
        return f"field 'platform' must be an object, got {_show(platform)}"
    for name in PLATFORM_FIELDS:
        if not isinstance(platform.get(name), str):
            return f"field 'platform.{name}' must be a string, got {_show(platform.get(name))}"
    runner = doc.get("runner")
    if runner is not None and not (isinstance(runner, dict) and isinstance(runner.get("key"), str)):
        return f"field 'runner' must be an object with a string 'key', got {_show(runner)}"
    records = doc.get("records")
    if not isinstance(records, list):
        return f"field 'records' must be a list, got {_show(records)}"
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        problem = _record_problem(record)
        if problem:
            return f"records[{i}]{problem}"
        nodeid = record["nodeid"]
        if nodeid in seen:
            return f"records[{i}].nodeid {_show(nodeid)} duplicates records[{seen[nodeid]}]"
        seen[nodeid] = i
    return None


def _record_problem(record: Any) -> str | None:
    if not isinstance(record, dict):
        return f" must be an object, got {_show(record)}"
    problem = value_problem(record, "")
    if problem:
        return problem
    if not isinstance(record.get("nodeid"), str) or not record["nodeid"]:
        return f".nodeid must be a non-empty string, got {_show(record.get('nodeid'))}"
    if record.get("outcome") not in OUTCOMES:
        return f".outcome must be one of {', '.join(OUTCOMES)}, got {_show(record.get('outcome'))}"
    for field in RECORD_FIELDS:
        # null: a test with no such case field (a quantizer test names no path)
        problem = json_problem(field, record.get(field.source))
        if problem:
            return f".{field.source} {problem}, got {_show(record[field.source])}"
    metrics = record.get("metrics")
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        return f".metrics must be an object or null, got {_show(metrics)}"
    for field in METRIC_FIELDS:
        problem = json_problem(field, metrics.get(field.source))
        if problem:
            return f".metrics.{field.source} {problem}, got {_show(metrics[field.source])}"
    return None
