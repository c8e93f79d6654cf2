"""A run stopped by SIGTERM (a cancelled CI job) or Ctrl-C keeps the tests that finished.

The run is signalled once pytest has printed a few results; its run directory must then
hold a results file marked partial with those tests, `latest` must point at it, and the
history must refuse it as partial.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_cli
from tests.hang_guard import HANG_GUARD_S

SUBSET = "test_linear and fp8_per_tensor and not fnuz"


def _like_a_terminal() -> None:
    """Ctrl-C handled as in an interactive shell (a background parent may have ignored it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("sig", "group"), [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["sigterm", "ctrl-c"]
)
def test_interrupted_run_keeps_finished_tests_marked_partial(
    tmp_path: Path, sig: signal.Signals, group: bool
) -> None:
    reports = tmp_path / "reports"
    cmd = [sys.executable, "-m", "harness", "run", "--reports-dir", str(reports)]
    child = subprocess.Popen(
        [*cmd, "--workers", "0", "--", "-k", SUBSET],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,  # its own process group, like a shell job
        preexec_fn=_like_a_terminal,
    )
    assert child.stdout is not None
    seen = ""
    deadline = time.monotonic() + HANG_GUARD_S
    started = re.compile(r"(?m)^\.{3}")  # pytest's progress line: three tests passed
    while not started.search(seen) and time.monotonic() < deadline:
        seen += child.stdout.read(1)
    assert started.search(seen), seen
    if group:
        os.killpg(child.pid, sig)  # a terminal's Ctrl-C reaches the whole job
    else:
        child.send_signal(sig)
    rest, _ = child.communicate(timeout=HANG_GUARD_S)
    assert child.returncode != 0, seen + rest

    latest = reports / "latest"
    assert (latest / "results.json").is_file(), seen + rest
    doc = json.loads((latest / "results.json").read_text())
    assert doc["partial"] is True
    assert 0 < doc["summary"]["total"] < 39, doc["summary"]  # 39 tests in the whole subset
    assert json.loads((reports / "latest.json").read_text()) == doc
    added = run_cli("history", "add", str(latest.resolve()), "--history", str(tmp_path / "h"))
    assert "partial run" in added.stderr


XDIST_SUBSET = "test_linear and fp8_per_tensor"  # 156 tests: seconds on two workers
XDIST_TOTAL = 156


def _start_run(reports: Path, workers: str, subset: str) -> subprocess.Popen[str]:
    """`harness run` in a session of its own, its output readable line by line."""
    cmd = [sys.executable, "-m", "harness", "run", "--reports-dir", str(reports)]
    return subprocess.Popen(
        [*cmd, "--workers", workers, "--", "-k", subset],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
        preexec_fn=_like_a_terminal,
    )


def _read_until(child: subprocess.Popen[str], pattern: str) -> str:
    assert child.stdout is not None
    seen = ""
    wanted = re.compile(pattern)
    deadline = time.monotonic() + HANG_GUARD_S
    while not wanted.search(seen) and time.monotonic() < deadline:
        char = child.stdout.read(1)
        if not char:
            break
        seen += char
    assert wanted.search(seen), seen
    return seen


def test_sigterm_to_the_cli_stops_an_xdist_run(tmp_path: Path) -> None:
    """CI cancels a job with SIGTERM to the CLI alone: the xdist controller must stop too."""
    reports = tmp_path / "reports"
    child = _start_run(reports, "2", XDIST_SUBSET)
    seen = _read_until(child, r"(?m)^\.{3}")
    child.send_signal(signal.SIGTERM)  # the CLI only, not its process group
    rest, _ = child.communicate(timeout=HANG_GUARD_S)
    assert child.returncode == 130, seen + rest
    doc = json.loads((reports / "latest" / "results.json").read_text())
    assert doc["partial"] is True, seen + rest
    assert 0 < doc["summary"]["total"] < XDIST_TOTAL, doc["summary"]
    assert (reports / "latest" / "summary.md").is_file()


def test_sigterm_while_pytest_starts_is_an_interruption(tmp_path: Path) -> None:
    """A SIGTERM before any test ran: exit 130, and no empty run directory left behind."""
    reports = tmp_path / "reports"
    child = _start_run(reports, "0", SUBSET)
    seen = _read_until(child, r"(?m)^\+ .*pytest")  # the child is starting, nothing ran
    child.send_signal(signal.SIGTERM)
    rest, _ = child.communicate(timeout=HANG_GUARD_S)
    assert child.returncode == 130, seen + rest
    assert "interrupted" in rest
    assert not any(p.is_dir() for p in reports.iterdir()), list(reports.iterdir())


def _processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_of_the_cli_leaves_no_pytest_running(tmp_path: Path) -> None:
    """The whole linear suite would run for minutes; its pytest must end within seconds of
    the CLI's death (it stops gracefully, as on SIGTERM)."""
    reports = tmp_path / "reports"
    child = _start_run(reports, "0", "test_linear")
    seen = _read_until(child, r"(?m)^\.{3}")
    assert [p for p in _processes_naming(str(reports)) if p != child.pid], seen
    child.kill()
    child.wait(timeout=HANG_GUARD_S)
    # A graceful stop takes seconds on a quiet machine; the whole suite, minutes. The wait
    # grows with the load per core, so a loaded runner is not mistaken for a leaked pytest.
    deadline = time.monotonic() + 30 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    try:
        while _processes_naming(str(reports)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _processes_naming(str(reports)) == [], "pytest outlived the CLI"
    finally:
        for pid in _processes_naming(str(reports)):
            os.kill(pid, signal.SIGKILL)
