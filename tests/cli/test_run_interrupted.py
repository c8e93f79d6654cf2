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
    deadline = time.monotonic() + 300
    started = re.compile(r"(?m)^\.{3}")  # pytest's progress line: three tests passed
    while not started.search(seen) and time.monotonic() < deadline:
        seen += child.stdout.read(1)
    assert started.search(seen), seen
    if group:
        os.killpg(child.pid, sig)  # a terminal's Ctrl-C reaches the whole job
    else:
        child.send_signal(sig)
    rest, _ = child.communicate(timeout=300)
    assert child.returncode != 0, seen + rest

    latest = reports / "latest"
    assert (latest / "results.json").is_file(), seen + rest
    doc = json.loads((latest / "results.json").read_text())
    assert doc["partial"] is True
    assert 0 < doc["summary"]["total"] < 39, doc["summary"]  # 39 tests in the whole subset
    assert json.loads((reports / "latest.json").read_text()) == doc
    added = run_cli("history", "add", str(latest.resolve()), "--history", str(tmp_path / "h"))
    assert "partial run" in added.stderr
