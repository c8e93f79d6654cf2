"""Hostile results files: each is one clear `ResultsError` naming the file and the field,
and `python -m harness report` turns it into one line on stderr with exit status 2."""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import assert_clear_error, tree_fingerprint

from harness.cli import main
from harness.errors import EXIT_USAGE
from harness.report.results import SCHEMA, ResultsError, read_results
from tests.conftest import run_cli

PROBES = settings(max_examples=40, deadline=None)


def _record(i: int) -> dict[str, Any]:
    return {
        "nodeid": f"suites/test_linear.py::test_linear[case{i}]",
        "suite": "linear",
        "scheme": "fp8_per_tensor",
        "path": "native",
        "outcome": "passed",
        "reason": None,
        "duration_s": 0.01,
        "metrics": {"sqnr_db": 30.0 + i, "peak_bytes": 1024, "kernel": "scaled_mm"},
    }


VALID: dict[str, Any] = {
    "schema": SCHEMA,
    "created": "2026-11-30T00:00:00Z",
    "exitstatus": 0,
    "platform": {"device": "cpu", "arch": "x86_64", "name": "cpu", "torch_version": "2.13.0"},
    "versions": {"qharness": "0.1.0", "torch": "2.13.0"},
    "summary": {"total": 3, "outcomes": {"passed": 3}, "skip_reasons": {}},
    "records": [_record(i) for i in range(3)],
}


# (how to break a valid document, the field the error must name)
def _set(path: tuple[Any, ...], value: Any):
    def mutate(doc: dict[str, Any]) -> Any:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return doc

    return mutate


def _drop(path: tuple[Any, ...]):
    def mutate(doc: dict[str, Any]) -> Any:
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        return doc

    return mutate


def _field(path: tuple[Any, ...]) -> str:
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


junk = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
# Per record field: values of the wrong type (what each must be is in read_results).
wrong_values = {
    "nodeid": st.one_of(st.none(), st.just(""), st.integers(), st.lists(st.text(), max_size=1)),
    "outcome": st.one_of(
        st.none(),
        st.integers(),
        st.text(max_size=8).filter(
            lambda v: v not in ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
        ),
    ),
    "metrics": st.one_of(st.text(max_size=4), st.integers(), st.lists(st.integers(), max_size=1)),
    "reason": st.one_of(st.integers(), st.booleans(), st.lists(st.text(), max_size=1)),
    "duration_s": st.one_of(st.text(max_size=4), st.booleans(), st.lists(st.floats(), max_size=1)),
}
record_field_values = st.sampled_from(sorted(wrong_values)).flatmap(
    lambda f: st.tuples(st.just(f), wrong_values[f])
)
mutations = st.one_of(
    st.builds(
        lambda i, f: (_drop(("records", i, f)), _field(("records", i, f))),
        st.integers(0, 2),
        st.sampled_from(["nodeid", "outcome"]),
    ),
    st.builds(
        lambda f: (_drop((f,)), f),
        st.sampled_from(["created", "exitstatus", "platform", "records"]),
    ),
    st.builds(lambda i: (_set(("records", i), None), f"records[{i}]"), st.integers(0, 2)),
    st.builds(
        lambda i, m, v: (
            _set(("records", i, "metrics", m), v),
            _field(("records", i, "metrics", m)),
        ),
        st.integers(0, 2),
        st.sampled_from(["sqnr_db", "peak_bytes"]),
        st.one_of(st.text(max_size=6), st.booleans(), st.lists(st.floats(), max_size=1)),
    ),
    st.builds(
        lambda i, fv: (_set(("records", i, fv[0]), fv[1]), _field(("records", i, fv[0]))),
        st.integers(0, 2),
        record_field_values,
    ),
    st.builds(
        lambda i: (
            _set(("records", i, "nodeid"), VALID["records"][0]["nodeid"]),
            f"records[{i}].nodeid",
        ),
        st.integers(1, 2),
    ),  # duplicate test id
    st.builds(
        lambda v: (_set(("platform", "device"), v), "platform.device"),
        junk.filter(lambda v: not isinstance(v, str)),
    ),
)


def _check(path: Path, *must_name: str) -> None:
    before = tree_fingerprint(path.parent)
    with pytest.raises(ResultsError) as info:
        read_results(path)
    assert_clear_error(str(info.value), str(path), *must_name)
    assert tree_fingerprint(path.parent) == before


@PROBES
@given(mutation=mutations)
def test_broken_fields_are_one_error_naming_file_and_field(mutation) -> None:
    mutate, field = mutation
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.json"
        path.write_text(json.dumps(mutate(copy.deepcopy(VALID))))
        _check(path, field)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"[]", "JSON object"),
        (b"[1, 2]", "JSON object"),
        (b"null", "JSON object"),
        (b'{"schema": "qharness.results/1", "records": [\xff]}', "not UTF-8"),
        (b"\xfe\xff\x00{", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"schema":', "not valid JSON"),
    ],
)
def test_documents_that_are_not_results_files(tmp_path: Path, raw: bytes, words: str) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(raw)
    _check(path, words)


def test_a_fifo_results_file_does_not_hang(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    os.mkfifo(path)
    _check(path, "FIFO")


def test_the_valid_document_reads() -> None:
    """The probes break a document that is itself accepted."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "results.json"
        path.write_text(json.dumps(VALID))
        assert len(read_results(path)["records"]) == 3


def test_report_on_a_broken_results_file_is_exit_2_and_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps([VALID]))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(VALID))
    for argv in (
        ["report", "--results", str(path)],
        ["report", "--results", str(baseline), "--baseline", str(path)],
    ):
        assert main(argv) == EXIT_USAGE
        err = capsys.readouterr().err
        assert_clear_error(err, str(path), "JSON object")


def test_null_case_fields_are_valid(tmp_path: Path) -> None:
    """Tests without a path (quantizer, loaders-agree) or a scheme (platform) record null
    there; the reader must accept what the plugin writes."""
    doc = json.loads(json.dumps(VALID))
    doc["records"][0]["path"] = None
    doc["records"][1]["scheme"] = None
    doc["records"][1]["path"] = None
    target = tmp_path / "results.json"
    target.write_text(json.dumps(doc))
    assert len(read_results(target)["records"]) == 3


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "-1"])
def test_a_peak_that_is_no_byte_count_is_refused_not_crashed_on(tmp_path: Path, value: str) -> None:
    """JSON readers take Infinity and NaN: a peak of them passed validation, then the
    report's integer conversion crashed (exit 3)."""
    doc = json.dumps(VALID).replace('"peak_bytes": 1024', f'"peak_bytes": {value}', 1)
    path = tmp_path / "results.json"
    path.write_text(doc)
    _check(path, "records[0].metrics.peak_bytes")
    done = run_cli("report", "--results", str(path))
    assert done.returncode == 2, done.stderr
    assert "peak_bytes" in done.stderr
