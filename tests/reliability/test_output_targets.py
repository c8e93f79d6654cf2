"""Outputs named on the command line never replace what sits at the path.

Reported: `report --out/--html/--summary` and `run --out` renamed a temp file over the
target without looking at it: a FIFO or a device became a regular file (as root,
``--out /dev/null`` replaced /dev/null), a directory or another run's file was replaced,
two outputs naming one file each silently won, and ``run --out X/y.json`` with ``X`` a file
was an internal error. Each is now a stream, or one clear line with exit 2.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from reliability_helpers import assert_clear_error

from harness import cli
from harness.errors import EXIT_USAGE
from harness.report.reading.results import write_results
from tests.conftest import run_cli


def _run_dir(root: Path, name: str = "20261201T0300Z-cpu-aaaa") -> Path:
    """A run directory as `run` leaves it: results, junit, reports."""
    run = root / name
    run.mkdir(parents=True)
    record = {"nodeid": "suites/test_x.py::test_a", "outcome": "passed", "reason": None}
    write_results(run / "results.json", [record], exitstatus=0)
    for name in ("junit.xml", "summary.md", "report.html"):
        (run / name).write_text(f"the run's own {name}")
    return run


class _FifoReader:
    """Reads a FIFO while the command writes it. The read end is open before the command
    starts, so its open never blocks, and a command that never opens it cannot hang us."""

    def __init__(self, fifo: Path) -> None:
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.data = bytearray()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:  # a writer is there, with nothing yet
                chunk = None
            if chunk:
                self.data += chunk
            elif chunk == b"" and self.done.is_set():
                return
            else:
                time.sleep(0.01)

    def close(self) -> bytes:
        self.done.set()
        self.thread.join()
        os.close(self.fd)
        return bytes(self.data)


# What each output holds for the run of `_run_dir` (its one platform and passed test).
MARKERS = {"--out": b"passed", "--html": b"</html>", "--summary": b"passed"}


@pytest.mark.parametrize("flag", ["--out", "--html", "--summary"])
def test_report_writes_a_fifo_as_a_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    run = _run_dir(tmp_path / "reports")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = _FifoReader(fifo)
    try:
        status = cli.main(["report", str(run), flag, str(fifo)])
    finally:
        data = reader.close()
    assert status == 0, capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
    assert MARKERS[flag] in data, data[:300]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "reports"]  # no temp left


def test_report_writes_a_character_device_as_a_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in for /dev/null made in tmp (the same device numbers)."""
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError as exc:
        pytest.skip(f"cannot make a device node here (needs CAP_MKNOD): {exc}")
    run = _run_dir(tmp_path / "reports")
    assert cli.main(["report", str(run), "--summary", str(device)]) == 0, capsys.readouterr()
    assert stat.S_ISCHR(os.lstat(device).st_mode), "the device was replaced by a file"


def test_report_and_run_out_to_dev_null_leave_it_a_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path / "reports")
    assert cli.main(["report", str(run), "--out", "/dev/null", "--html", "/dev/null"]) == 0
    assert "report written to /dev/null" in capsys.readouterr().out
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_directory_as_an_output_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path / "reports")
    folder = tmp_path / "folder"
    folder.mkdir()
    for flag in ("--out", "--html", "--summary"):
        assert cli.main(["report", str(run), flag, str(folder)]) == EXIT_USAGE
        assert_clear_error(capsys.readouterr().err, flag, str(folder), "is a directory")
    assert list(folder.iterdir()) == []


def test_report_never_replaces_another_runs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path / "reports")
    other = _run_dir(tmp_path / "reports", "20261130T0300Z-cpu-aaaa")
    for flag, name in (("--html", "junit.xml"), ("--summary", "summary.md"), ("--out", "x")):
        target = other / name if name != "x" else other / "repro" / "bundle.safetensors"
        assert cli.main(["report", str(run), flag, str(target)]) == EXIT_USAGE
        assert_clear_error(capsys.readouterr().err, flag, str(other), "refusing to replace")
    assert (other / "junit.xml").read_text() == "the run's own junit.xml"
    assert (other / "summary.md").read_text() == "the run's own summary.md"
    assert not (other / "repro").exists()


def test_report_may_rewrite_the_reports_of_the_run_it_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/CI.md: `report reports/latest --history H --html reports/latest/report.html`."""
    run = _run_dir(tmp_path / "reports")
    argv = ["report", str(run), "--html", str(run / "report.html")]
    assert cli.main([*argv, "--summary", str(run / "summary.md")]) == 0, capsys.readouterr()
    assert "<html" in (run / "report.html").read_text().lower()
    assert (run / "summary.md").read_text() != "the run's own summary.md"
    assert cli.main(["report", str(run), "--html", str(run / "junit.xml")]) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--html", "refusing to replace")


@pytest.mark.parametrize(
    ("first", "second"), [("--out", "--html"), ("--html", "--summary"), ("--out", "--summary")]
)
def test_two_outputs_naming_one_file_are_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str, second: str
) -> None:
    run = _run_dir(tmp_path / "reports")
    target = tmp_path / "report.txt"
    link = tmp_path / "link.txt"
    link.symlink_to(target.name)
    assert cli.main(["report", str(run), first, str(target), second, str(link)]) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, first, second, "both name")
    assert not target.exists()


def _no_pytest(*args: object, **kwargs: object) -> int:
    raise AssertionError("pytest was started")


def test_run_out_never_replaces_another_runs_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("harness.cli.run.run_pytest", _no_pytest)
    reports = tmp_path / "reports"
    other = _run_dir(reports)
    before = (other / "results.json").read_bytes()
    argv = ["run", "--reports-dir", str(reports), "--out", str(other / "results.json")]
    assert cli.main([*argv, "-k", "x"]) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--out", "refusing to replace")
    assert (other / "results.json").read_bytes() == before
    assert sorted(p.name for p in reports.iterdir()) == [other.name]  # no run was started


def test_run_out_below_a_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("harness.cli.run.run_pytest", _no_pytest)
    blocker = tmp_path / "X"
    blocker.write_text("a file")
    out = blocker / "y.json"
    argv = ["run", "--reports-dir", str(tmp_path / "reports"), "--out", str(out), "-k", "x"]
    assert cli.main(argv) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--out", str(blocker), "is not a directory")
    assert blocker.read_text() == "a file"


def test_finish_run_out_below_a_file_is_one_clear_error(tmp_path: Path) -> None:
    """The same refusal when the file appeared while the suites ran (checked again)."""
    from harness.cli.run_reports import finish_run
    from harness.errors import UsageError
    from harness.report.reading.rundir import RunDir

    run = RunDir(_run_dir(tmp_path / "reports"))
    blocker = tmp_path / "X"
    blocker.write_text("a file")
    with pytest.raises(UsageError) as info:
        finish_run(run, tmp_path / "reports", blocker / "y.json")
    assert_clear_error(str(info.value), str(blocker), "is not a directory")


def test_run_out_to_a_fifo_streams_the_results(tmp_path: Path) -> None:
    from harness.cli.run_reports import finish_run
    from harness.report.reading.rundir import RunDir

    run = RunDir(_run_dir(tmp_path / "reports"))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = _FifoReader(fifo)
    try:
        finish_run(run, tmp_path / "reports", fifo, full=False)
    finally:
        data = reader.close()
    assert data == run.results.read_bytes()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_csp_safe_html_to_a_fifo_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--csp-safe writes NAME.css and NAME-assets/ beside the page: a stream has no beside."""
    run = _run_dir(tmp_path / "reports")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert cli.main(["report", str(run), "--html", str(fifo), "--csp-safe"]) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--html", "--csp-safe", "regular file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "reports"]


def test_csp_safe_html_never_replaces_another_runs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path / "reports")
    other = _run_dir(tmp_path / "reports", "20261130T0300Z-cpu-aaaa")
    argv = ["report", str(run), "--html", str(other / "report.html"), "--csp-safe"]
    assert cli.main(argv) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--html", "refusing to replace")
    assert (other / "report.html").read_text() == "the run's own report.html"


def test_run_out_replaces_its_own_earlier_copy(tmp_path: Path) -> None:
    """A folder holding only an earlier ``--out`` copy is no run directory: each night's
    ``run --out ci/results.json`` replaces the last one's."""
    from harness.cli.run_reports import finish_run
    from harness.report.reading.rundir import RunDir

    reports = tmp_path / "reports"
    copy = tmp_path / "ci" / "results.json"
    for name in ("20261201T0300Z-cpu-aaaa", "20261202T0300Z-cpu-aaaa"):
        run = RunDir(_run_dir(reports, name))
        finish_run(run, reports, copy, full=False)
        assert copy.read_bytes() == run.results.read_bytes()


def test_an_output_through_a_symlink_replaces_its_target_not_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``/dev/stdout`` (a link) redirected to a file: the link must stay a link."""
    run = _run_dir(tmp_path / "reports")
    target = tmp_path / "target.md"
    target.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(target.name)
    assert cli.main(["report", str(run), "--summary", str(link)]) == 0, capsys.readouterr()
    assert link.is_symlink()
    assert os.readlink(link) == target.name
    assert "passed" in target.read_text()


def test_report_out_to_dev_stdout_into_a_pipe_is_streamed(tmp_path: Path) -> None:
    """``--out /dev/stdout`` with stdout a pipe: the link resolves to no path at all
    (``/proc/<pid>/fd/pipe:[n]``), where a temp file and a rename can only fail."""
    run = _run_dir(tmp_path / "reports")
    done = run_cli("report", str(run), "--out", "/dev/stdout")  # captured: stdout is a pipe
    assert done.returncode == 0, done.stderr
    assert "passed" in done.stdout
    assert "report written to /dev/stdout" in done.stdout


def test_a_fifo_whose_reader_leaves_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reader closes its end after the writer opened the FIFO: the write meets a broken
    pipe, which names the FIFO (exit 4) instead of passing for a closed stdout (141)."""
    run = _run_dir(tmp_path / "reports")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    real_open = os.open

    def open_then_reader_leaves(path: object, flags: int, *args: object) -> int:
        fd = real_open(path, flags, *args)  # type: ignore[arg-type]
        if Path(str(path)) == fifo:
            os.close(reader)
        return fd

    monkeypatch.setattr(os, "open", open_then_reader_leaves)
    status = cli.main(["report", str(run), "--summary", str(fifo)])
    err = capsys.readouterr().err
    assert status == 4, err
    assert "broken pipe" in err
    assert str(fifo) in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
