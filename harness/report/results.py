"""The results file: one JSON document per run, the input of reports.

Schema ``qharness.results/1`` (documented in docs/CLI.md):
``{"schema", "created", "exitstatus", "platform", "versions", "summary", "records": [...]}``
where each record has ``nodeid, suite, scheme, path, shape, ..., outcome, reason,
duration_s, metrics``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import torch

import harness
from harness.errors import QHarnessError
from harness.store.atomic import write_text_atomic

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


def write_results(
    path: Path, records: list[dict[str, Any]], exitstatus: int, partial: bool | None = None
) -> None:
    """Write the results file atomically. ``partial`` (default: the run was interrupted)
    marks a file holding only the tests that finished; history and reports treat it so."""
    from harness.platform.capabilities import capabilities
    from harness.platform.info import detect

    platform = detect()
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
        "versions": {"qharness": harness.__version__, "torch": torch.__version__},
        "summary": summarize(records),
        "records": sorted(records, key=lambda r: str(r["nodeid"])),
    }
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")


class ResultsError(QHarnessError):
    pass


def read_results(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ResultsError(
            f"results file {path} does not exist; run `python -m harness run`"
        ) from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"results file {path} is not valid JSON ({exc})") from exc
    if doc.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    return dict(doc)
