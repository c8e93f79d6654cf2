"""The text report (`report --results`) states what the records hold, for varied runs.

It is rendered from the run's digest, never from the records: for seeded, varied results
files (tests/report/results_fuzz.py) the counts and names it prints are checked against
the records themselves, counted here without the report's code.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.report.model.escape import md_inline
from harness.report.outputs.text import render_report
from tests.report.results_fuzz import results_doc

SEEDS = range(40)


def _section(text: str, heading: str) -> list[str]:
    """The lines of the section whose heading starts with ``heading``."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
    return [line for line in lines[start + 2 : end] if line]


def _outcome_table(text: str) -> Counter[str]:
    """Tests per outcome, summed over the outcome table's rows."""
    lines = _section(text, "## Outcomes by suite and path")
    names = lines[0].split()[1:]  # "outcome  error  failed ..."
    found: Counter[str] = Counter()
    for row in lines[2:]:
        for name, count in zip(names, row.split()[-len(names) :], strict=True):
            found[name] += int(count)
    return found


@pytest.fixture(params=SEEDS, ids=lambda s: f"seed{s}")
def run(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[dict[str, Any], str]:
    doc = results_doc(request.param)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return doc, render_report(path, max_rows=1000)


def test_the_outcome_table_counts_every_record(run: tuple[dict[str, Any], str]) -> None:
    doc, text = run
    expected = Counter(r["outcome"] for r in doc["records"])
    if not expected:
        assert _section(text, "## Outcomes") == ["no records"]
    else:
        assert _outcome_table(text) == expected


def test_skips_and_failures_are_the_records(run: tuple[dict[str, Any], str]) -> None:
    doc, text = run
    skips = [r for r in doc["records"] if r["outcome"] == "skipped"]
    failing = [r for r in doc["records"] if r["outcome"] in ("failed", "error")]
    assert f"## Skips ({len(skips)}), by reason" in text
    lines = [line for line in _section(text, "## Skips") if line != "none"]
    assert sum(int(line[2:].split(" x ", 1)[0]) for line in lines) == len(skips)
    assert f"## Failures ({len(failing)})" in text
    lines = _section(text, "## Failures")
    assert [line.split(": ", 1)[0] for line in lines if line != "none"] == [
        f"- {md_inline(r['nodeid'])}" for r in failing
    ]


def test_the_largest_peak_is_the_records_largest(run: tuple[dict[str, Any], str]) -> None:
    doc, text = run
    peaks = [
        (r.get("metrics") or {}).get("peak_bytes")
        for r in doc["records"]
        if (r.get("metrics") or {}).get("peak_bytes") is not None
    ]
    if not peaks:
        assert "## Largest peak memory" not in text
        return
    # a record without an integer peak makes the column float64, as a table of them would
    exact = len(peaks) == len(doc["records"]) and all(isinstance(p, int) for p in peaks)
    largest = max(peaks) if exact else int(max(float(p) for p in peaks))
    shown = [int(line.split()[-1]) for line in _section(text, "## Largest peak memory")[1:]]
    assert max(shown) == largest


def test_the_seeds_cover_what_the_text_shows(tmp_path: Path) -> None:
    """The seeds hold every section at least once (else the tests above prove little)."""
    texts = []
    for seed in SEEDS:
        path = tmp_path / f"{seed}.json"
        path.write_text(json.dumps(results_doc(seed)))
        texts.append(render_report(path))
    for heading in (
        "no records",
        "## What ran on this simulated platform",
        "## Linear SQNR",
        "## MoE SQNR",
        "## Models",
        "## Largest peak memory",
        "(no reason given)",
    ):
        assert any(heading in t for t in texts), heading
