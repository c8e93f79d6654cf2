"""File-system faults are the machine's, not qharness bugs: one line, the path, the cause, exit 4.

Read-only and full file systems are real ones: a tmpfs mounted read-only, or one of a few
KiB filled up (root can write through permission bits, so ``chmod`` would prove nothing).
Where mounting is not allowed the probes skip, saying so.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.errors import EXIT_FILESYSTEM, FileSystemError
from harness.report.reading.results import SCHEMA, rescue_path, write_results
from harness.store.golden_format import JOURNAL_NAME
from harness.store.golden_store import GoldenStore
from tests.conftest import run_cli
from tests.reliability.reliability_helpers import NEW_BUILDERS, assert_clear_error, make_store

TINY_RUN = "test_linear and fp8_per_tensor and not fnuz and 1x16x256 and emulated and bias-bf16"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """``mount(options)``: a fresh tmpfs with those options; unmounted afterwards."""
    mounted: list[Path] = []

    def make(options: str) -> Path:
        target = tmp_path / f"fs{len(mounted)}"
        target.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {done.stderr}")
        mounted.append(target)
        return target

    yield make
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


def _read_only(mount: Callable[[str], Path], files: dict[str, str] | None = None) -> Path:
    root = mount("size=1m")
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
    return root


def _full(mount: Callable[[str], Path]) -> Path:
    root = mount("size=64k")
    with (root / "filler").open("wb") as handle, contextlib.suppress(OSError):
        handle.write(b"x" * (1 << 20))  # ENOSPC: full now
    return root


def _results_doc() -> str:
    record = {"nodeid": "suites/test_x.py::test_a", "outcome": "passed", "reason": None}
    return json.dumps(
        {
            "schema": SCHEMA,
            "created": "2026-12-01T03:00:00Z",
            "exitstatus": 0,
            "platform": {"device": "cpu", "arch": "x", "name": "x", "torch_version": "2"},
            "records": [record],
        }
    )


def _assert_fs_fault(done: subprocess.CompletedProcess[str], path: Path, cause: str) -> None:
    assert done.returncode == EXIT_FILESYSTEM, (done.returncode, done.stdout[-1500:], done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert str(path) in errors[0]
    assert cause in errors[0]
    assert "internal error" not in done.stderr


def test_read_only_reports_directory(mount: Callable[[str], Path]) -> None:
    ro = _read_only(mount)
    done = run_cli("run", "--reports-dir", str(ro / "reports"), "--workers", "0", "-k", "x")
    _assert_fs_fault(done, ro / "reports", "read-only file system")


def test_read_only_out_keeps_the_results_in_the_run_directory(
    mount: Callable[[str], Path], tmp_path: Path
) -> None:
    ro = _read_only(mount)
    reports = tmp_path / "reports"
    done = run_cli(
        "run", "--reports-dir", str(reports), "--out", str(ro / "out.json"),
        "--workers", "0", "-k", TINY_RUN,
    )  # fmt: skip
    _assert_fs_fault(done, ro, "read-only file system")
    kept = reports / "latest" / "results.json"
    assert kept.is_file()
    assert str(kept.resolve()) in done.stderr


def test_read_only_history(mount: Callable[[str], Path], tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(_results_doc())
    ro = _read_only(mount)
    done = run_cli("history", "add", str(tmp_path / "run.json"), "--history", str(ro / "h"))
    _assert_fs_fault(done, ro / "h", "read-only file system")


def test_full_disk_under_report_outputs(mount: Callable[[str], Path], tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(_results_doc())
    full = _full(mount)
    done = run_cli(
        "report", "--results", str(tmp_path / "run.json"), "--html", str(full / "r.html")
    )
    _assert_fs_fault(done, full, "no space left on device")
    assert [p.name for p in full.iterdir()] == ["filler"]  # no temporary file left behind


def test_read_only_golden_store(mount: Callable[[str], Path]) -> None:
    ro = _read_only(mount)
    done = run_cli("golden", "refresh", "--root", str(ro), "--only", "linear/fp8_per_block")
    _assert_fs_fault(done, ro, "read-only file system")


def test_results_of_a_run_directory_made_read_only_are_kept(
    mount: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The run directory turned read-only while the tests ran: the results file goes to
    the temporary directory, and the line saying so names both places."""
    ro = _read_only(mount, {"run/junit.xml": ""})
    target = ro / "run" / "results.json"
    record = {"nodeid": "suites/test_x.py::test_a", "outcome": "passed", "reason": None}
    kept = write_results(target, [record], exitstatus=0)
    try:
        assert kept == rescue_path(target)
        assert json.loads(kept.read_text())["records"] == [record]
        line = capsys.readouterr().err
        assert str(target) in line
        assert str(kept) in line
    finally:
        kept.unlink(missing_ok=True)


RO_AT_START = """\
import os
import subprocess


def pytest_sessionstart(session):
    subprocess.run(["mount", "-o", "remount,ro", os.environ["RO_AT_START_MOUNT"]], check=True)
"""


def test_a_run_directory_turned_read_only_during_the_run_keeps_its_results(
    mount: Callable[[str], Path], tmp_path: Path
) -> None:
    """The whole CLI: the run directory exists, then its file system turns read-only as
    pytest's session starts (a plugin remounts it), so nothing the run writes at its end
    can land there. The results are rescued, junit.xml is one line, the run is exit 4."""
    fs = mount("size=1m")
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    (plugin_dir / "ro_at_start.py").write_text(RO_AT_START)
    temp = tmp_path / "temp"
    temp.mkdir()
    done = run_cli(
        "run", "--reports-dir", str(fs / "reports"), "--workers", "0", "-k", TINY_RUN,
        "-p", "ro_at_start",
        env={"PYTHONPATH": str(plugin_dir), "RO_AT_START_MOUNT": str(fs), "TMPDIR": str(temp)},
    )  # fmt: skip
    assert "Traceback" not in done.stdout + done.stderr, done.stdout[-3000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-3000:]
    (run_dir,) = (fs / "reports").iterdir()
    kept = temp / "qharness-rescued" / f"{run_dir.name}-results.json"
    _assert_fs_fault(done, kept, "could not be written")
    assert json.loads(kept.read_text())["records"], "the rescued results hold no records"
    junit_lines = [line for line in done.stderr.splitlines() if "junit.xml" in line]
    assert len(junit_lines) == 1, done.stderr
    assert "read-only file system" in junit_lines[0]


class _StopAtCommit(Exception):
    pass


def test_a_read_only_store_holding_a_committed_refresh_is_one_clear_error(
    mount: Callable[[str], Path], tmp_path: Path
) -> None:
    """A refresh that stopped after its commit point leaves a journal whoever opens the store
    must roll forward; on a read-only store that is a file-system error naming the store,
    the journal and the cause, as `golden check` on it is, never a raw OSError."""

    def stop(step: str) -> None:
        if step == "committed":
            raise _StopAtCommit

    made = tmp_path / "made"
    make_store(made)
    with pytest.raises(_StopAtCommit):
        GoldenStore(made, NEW_BUILDERS, on_commit_step=stop).refresh(log=lambda _: None)
    assert (made / JOURNAL_NAME / "PLAN.json").is_file()
    root = mount("size=1m")
    shutil.copytree(made, root, dirs_exist_ok=True)
    subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)

    with pytest.raises(FileSystemError) as info:
        GoldenStore(root, NEW_BUILDERS).load("suite/a")
    assert info.value.exit_code == EXIT_FILESYSTEM
    assert_clear_error(str(info.value), str(root), JOURNAL_NAME, "read-only file system")
    done = run_cli("golden", "check", "--root", str(root), "--no-recompute")
    _assert_fs_fault(done, root, "read-only file system")
