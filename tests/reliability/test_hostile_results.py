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
from harness.report.reading.results import SCHEMA, ResultsError, read_results, write_results
from harness.report.reading.runs import open_history
from harness.store.history import HistoryError
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


# Values that passed validation and broke a later step (each was exit 3 in `report`,
# `report --results` or `history add`): now refused where the file is read, one line
# naming the file and what is wrong, exit 2 (`history add` skips the run with that line).
DIGITS = "1" + "0" * 99_999  # a number of 100 000 digits
PEAK, SQNR = "records[0].metrics.peak_bytes", "records[0].metrics.sqnr_db"
OUT_OF_LIMITS = {
    "peak-1e30": (('"peak_bytes": 1024', '"peak_bytes": 1' + "0" * 30), (PEAK, "int64")),
    "int-metric-100k-digits": (('"sqnr_db": 30.0', f'"sqnr_db": {DIGITS}'), (SQNR, "int64")),
    "exitstatus-100k-digits": (
        ('"exitstatus": 0', f'"exitstatus": {DIGITS}'),
        ("field exitstatus", "100000 digits", "int64"),
    ),
    "float-100k-digits": (
        ('"duration_s": 0.01', f'"duration_s": {DIGITS}.5'),
        ("records[0].duration_s", "float64"),
    ),
    "float-1e400": (('"sqnr_db": 30.0', '"sqnr_db": 1e400'), (SQNR, "float64")),
    "float-peak-1e30": (('"peak_bytes": 1024', '"peak_bytes": 1e30'), (PEAK, "int64")),
    "surrogate-reason": (
        ('"reason": null', '"reason": "why \\ud800"'),
        ("records[0].reason", "lone surrogate"),
    ),
    "surrogate-nodeid": (("case0]", "case0\\udc80]"), ("records[0].nodeid", "lone surrogate")),
    "surrogate-key": (('"kernel"', '"\\udfff"'), ("records[0].metrics", "key", "surrogate")),
    "surrogate-platform": (
        ('"name": "cpu"', '"name": "\\ud83d"'),
        ("field platform.name", "lone surrogate"),
    ),
}


def _out_of_limits(tmp_path: Path, case: str) -> Path:
    (old, new), _ = OUT_OF_LIMITS[case]
    text = json.dumps(VALID)
    assert old in text
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(text.replace(old, new, 1))
    return run


@pytest.mark.parametrize("case", sorted(OUT_OF_LIMITS))
def test_values_past_the_limits_are_refused_where_read(tmp_path: Path, case: str) -> None:
    run = _out_of_limits(tmp_path, case)
    _check(run / "results.json", *OUT_OF_LIMITS[case][1])


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("case", sorted(OUT_OF_LIMITS))
def test_values_past_the_limits_are_exit_2_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    run = _out_of_limits(tmp_path, case)
    words = OUT_OF_LIMITS[case][1]
    for argv in (
        ["report", "--results", str(run / "results.json")],
        ["report", str(run), "--html", str(tmp_path / "r.html")],
    ):
        status, out, err = _cli(argv, capsys)
        assert status == EXIT_USAGE, out + err
        assert_clear_error(err, str(run / "results.json"), *words)
    history = tmp_path / "history"
    status, out, err = _cli(["history", "add", str(run), "--history", str(history)], capsys)
    assert status == 0, out + err
    assert_clear_error(err, f"{run}: skipped: results file", *words)
    assert "0 run(s)" in out


def test_the_limits_themselves_are_accepted(tmp_path: Path, capsys) -> None:
    """The largest int64 peak, the ``Infinity`` SQNR of an exact result and non-ASCII text
    are valid: the limits refuse only what a later step cannot hold."""
    doc = copy.deepcopy(VALID)
    doc["records"][0]["metrics"]["peak_bytes"] = 2**63 - 1
    doc["records"][1]["metrics"]["sqnr_db"] = float("inf")
    doc["records"][2]["reason"] = "skipped: µs, ✓, 😀"
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(doc))
    assert len(read_results(run / "results.json")["records"]) == 3
    status, out, err = _cli(["report", "--results", str(run / "results.json")], capsys)
    assert status == 0, out + err
    status, out, err = _cli(["history", "add", str(run), "--history", str(tmp_path / "h")], capsys)
    assert status == 0, out + err
    assert "run: added" in out


def test_a_run_directory_named_with_non_utf8_bytes_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(os.fsdecode(os.fsencode(tmp_path) + b"/night\xff-run"))
    run.mkdir()
    (run / "results.json").write_text(json.dumps(VALID))
    for argv in (
        ["report", "--results", str(run / "results.json")],
        ["report", str(run), "--html", str(tmp_path / "r.html")],
    ):
        status, out, err = _cli(argv, capsys)
        assert status == EXIT_USAGE, out + err
        assert_clear_error(err, "night\\xff-run", "not valid UTF-8")
    history = tmp_path / "history"
    status, out, err = _cli(["history", "add", str(run), "--history", str(history)], capsys)
    assert status == 0, out + err
    assert_clear_error(err, "skipped", "not valid UTF-8")
    assert "0 run(s)" in out


def test_a_history_directory_that_is_a_symlink_loop_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(VALID))
    loop = tmp_path / "history"
    loop.symlink_to(loop)
    for argv in (
        ["history", "add", str(run), "--history", str(loop)],
        ["history", "list", "--history", str(loop)],
        ["report", str(run), "--history", str(loop)],
    ):
        status, out, err = _cli(argv, capsys)
        assert status == EXIT_USAGE, out + err
        assert_clear_error(err, str(loop), "symlink loop")
    with pytest.raises(HistoryError, match="symlink loop"):
        open_history(loop)


def test_what_a_run_records_reads_back_within_the_limits(tmp_path: Path) -> None:
    """A failure message or skip reason holding a lone surrogate (undecodable bytes of a
    file name, say) is written as its escape text, so the run's file is never refused."""
    record = copy.deepcopy(VALID["records"][0])
    record |= {"outcome": "skipped", "reason": "no such file: bad\udcffname"}
    record["metrics"]["note\udc80"] = "x"
    path = write_results(tmp_path / "results.json", [record], exitstatus=0)
    doc = read_results(path)
    assert doc["records"][0]["reason"] == "no such file: bad\\udcffname"
    assert doc["summary"]["skip_reasons"] == {"no such file: bad\\udcffname": 1}
    assert doc["records"][0]["metrics"]["note\\udc80"] == "x"
