"""A results file streamed record by record (`harness.report.reading.stream`) gives what reading it
whole gives, wherever the read chunks end; and a file the stream cannot vouch for is read
whole, so every problem is reported with `read_results`' own message."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from harness.report.model.digest import digest_run
from harness.report.reading import stream
from harness.report.reading.results import SCHEMA, ResultsError, read_results
from harness.report.reading.stream import stream_results


def _doc(rng: random.Random, count: int) -> dict[str, Any]:
    records = []
    for i in range(count):
        record: dict[str, Any] = {
            "nodeid": f"suites/test_linear.py::t[{i}-é\\u202e]",
            "outcome": rng.choice(["passed", "failed", "skipped", "xfailed"]),
        }
        if rng.random() < 0.7:
            record |= {"suite": "linear", "scheme": rng.choice(["fp8", "mx"]), "path": "native"}
        if rng.random() < 0.5:
            record["metrics"] = {"sqnr_db": rng.choice([12345.678, 1e-300, float("inf"), 30])}
        records.append(record)
    return {
        "schema": SCHEMA, "created": "2026-11-01T00:00:00Z", "exitstatus": 0,
        "platform": {"device": "cpu", "arch": "x86_64", "name": "cpu", "torch_version": "2"},
        "records": records, "summary": {"total": count},
    }  # fmt: skip


@pytest.mark.parametrize("chunk", [1, 7, 4096])
@pytest.mark.parametrize("indent", [None, 1])
def test_streamed_records_are_the_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, indent: int | None
) -> None:
    """Chunks of one byte split every token and every UTF-8 sequence; numbers at a chunk's
    end are taken only once they end."""
    monkeypatch.setattr(stream, "CHUNK", chunk)
    doc = _doc(random.Random(chunk), 40)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc, indent=indent, sort_keys=True) + "\n")
    seen: list[dict[str, Any]] = []
    head = stream_results(path, seen.append)
    whole = read_results(path)
    assert head is not None
    assert seen == whole["records"]
    assert head == {k: v for k, v in whole.items() if k != "records"}


def test_digest_streamed_and_read_whole_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_doc(random.Random(3), 200)))
    streamed = digest_run(path)
    monkeypatch.setattr("harness.report.model.digest.stream_results", lambda path, each: None)
    assert digest_run(path) == streamed


def _written(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "results.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


GOOD = json.dumps(_doc(random.Random(0), 3))
BAD_FILES = {
    "not JSON": GOOD[:-5],
    "trailing data": GOOD + " {}",
    "UTF-8 BOM": "\ufeff" + GOOD,
    "not UTF-8": GOOD.encode()[:40] + b"\xff" + GOOD.encode()[40:],
    "records not a list": GOOD.replace('"records": [', '"records": {"a": [').replace(
        '], "summary"', ']}, "summary"'
    ),
    "a bad record": GOOD.replace('"outcome": "', '"outcome": "nope', 1),
    "a repeated test id": GOOD.replace("t[1-", "t[0-"),
    "a bad head": GOOD.replace(SCHEMA, "qharness.results/0"),
    "no records": json.dumps({k: v for k, v in json.loads(GOOD).items() if k != "records"}),
    "nested deeply": GOOD[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "an array": "[" + GOOD + "]",
}


@pytest.mark.parametrize("problem", sorted(BAD_FILES))
def test_a_file_the_stream_cannot_vouch_for_is_read_whole(tmp_path: Path, problem: str) -> None:
    path = _written(tmp_path, BAD_FILES[problem])
    with pytest.raises(ResultsError) as whole:
        read_results(path)
    assert stream_results(path, lambda record: None) is None
    with pytest.raises(ResultsError) as digested:
        digest_run(path)
    assert str(digested.value) == str(whole.value)


def test_a_fifo_or_a_directory_is_not_streamed(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert stream_results(fifo, lambda record: None) is None  # and does not block
    assert stream_results(tmp_path, lambda record: None) is None


def test_two_test_ids_of_one_hash_are_decided_by_the_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Duplicates are found by hash; a collision of distinct ids is not an error."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_doc(random.Random(5), 20)))
    expected = digest_run(path)
    monkeypatch.setattr(stream, "hash", lambda value: 0, raising=False)
    assert stream_results(path, lambda record: None) is None
    assert digest_run(path) == expected
