"""pytest as a child process of ``run`` and ``selftest``: its worker arguments, the child
itself (SIGTERM forwarded, Ctrl-C waited out) and its exit statuses mapped onto ours."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from harness.errors import EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

# A green run's output stays short: pytest lists failures and errors only (the project's -ra
# would list every skip again after qharness's "skips by reason"); the details are files.
CONCISE_PYTEST = ("-rfE",)

INHERITED_PYTEST_VARIABLES = frozenset(
    {
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
        "PYTEST_CURRENT_TEST",
    }
)

# pytest's exit statuses (pytest.ExitCode) and this CLI's: pytest's 2-4 would otherwise collide
# with "bad input" and "internal error".
PYTEST_INTERRUPTED = 2
PYTEST_USAGE = 4
_PYTEST_EXIT = {0: EXIT_OK, 1: EXIT_FAILED, 2: EXIT_INTERRUPTED, 3: EXIT_INTERNAL, 4: EXIT_USAGE}


def exit_for_pytest(status: int) -> int:
    """This CLI's exit status for a pytest exit status (5, no tests ran, is a failure)."""
    return _PYTEST_EXIT.get(status, EXIT_FAILED)


def xdist_workers(requested: str) -> list[str]:
    """pytest arguments for ``requested`` workers; benchmarks need a serial run, so they are
    switched off under xdist (run them with `pytest benchmarks --benchmark-only`)."""
    if requested == "0":
        return []
    return ["-n", requested, "-p", "no:benchmark"]


def run_pytest(cmd: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> int:
    """Run pytest as a child; SIGTERM to us is passed on, so the child ends its session and
    writes what finished (partial). Ctrl-C reaches the child through the terminal. The child
    ends itself when we die (`harness.process.watch_parent`); one that died of a signal
    before it could record anything returns pytest's "interrupted" status."""
    import signal

    from harness.process import child_environment, child_was_signalled

    # A pytest session of our own: nothing of an enclosing one (an xdist worker's identity
    # would switch pytest-benchmark off) is inherited.
    env = child_environment(os.environ, INHERITED_PYTEST_VARIABLES)
    env.update(extra_env or {})
    # SIGTERM is ours to forward from before the child exists: one that arrives while it
    # starts is passed on once it does, so the run ends after the child has written its
    # session files, never while it still writes them into the run directory.
    started: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        if started:
            started[0].send_signal(signum)
        else:
            pending.append(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        print("+ " + " ".join(cmd), flush=True)
        child = subprocess.Popen(cmd, cwd=cwd, env=env)
        started.append(child)
        for signum in pending:
            child.send_signal(signum)
        while True:
            try:
                status = child.wait()
                return PYTEST_INTERRUPTED if child_was_signalled(status) else status
            except KeyboardInterrupt:
                continue  # the child got the same Ctrl-C; wait for it to write its results
    finally:
        signal.signal(signal.SIGTERM, previous)
