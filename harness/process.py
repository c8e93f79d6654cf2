"""The run's processes: a signal stops the whole run, and no pytest outlives its CLI.

`harness run` starts pytest as a child; with pytest-xdist that child is a controller whose
own loop decides when the session ends. Three things keep a signalled or killed run sane:

- `stop_session` sets the stop flag both of the pytest session and of the xdist
  controller (which only looks at its own), so workers get no new tests and the session
  ends as interrupted with every finished test recorded.
- `watch_parent` (in the child) asks Linux to send it SIGTERM when the CLI that started it
  dies, even by SIGKILL (``PR_SET_PDEATHSIG``), and stops at once if the CLI is already
  gone; the child then stops gracefully, as on any SIGTERM.
- `child_was_signalled`: a pytest child that died of a signal (before its handler was in
  place, during start-up) counts as interrupted, not as a failed run.

`call_with_time_limit` bounds a call that may hang (a plugin's import) and says what it
waits for when it is slow.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

PARENT_VARIABLE = "QHARNESS_PARENT_PID"  # set by the CLI for the pytest child it starts
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def stop_session(session: Any, reason: str) -> None:
    """Stop ``session`` after its running tests, with or without pytest-xdist."""
    session.shouldstop = reason
    controller = session.config.pluginmanager.getplugin("dsession")
    if controller is not None and not getattr(controller, "shouldstop", False):
        controller.shouldstop = reason  # xdist's loop checks this one, not the session's


def _set_parent_death_signal(signum: int) -> bool:
    """Linux: deliver ``signum`` to this process when its parent dies; False elsewhere."""
    if sys.platform != "linux":
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def watch_parent(environ: Mapping[str, str]) -> None:
    """In a pytest child of the CLI: end with SIGTERM when the CLI dies (see module doc)."""
    expected = environ.get(PARENT_VARIABLE, "")
    if not expected.isdigit():
        return  # not started by the CLI
    if not _set_parent_death_signal(signal.SIGTERM):
        return
    if os.getppid() != int(expected):  # the CLI died before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def child_environment(environ: Mapping[str, str], drop: frozenset[str]) -> dict[str, str]:
    """The environment of a pytest child: ``environ`` less ``drop``, naming its parent."""
    env = {k: v for k, v in environ.items() if k not in drop}
    env[PARENT_VARIABLE] = str(os.getpid())
    return env


def child_was_signalled(returncode: int) -> bool:
    """A child process that ended by a signal (``Popen`` reports minus its number)."""
    return returncode < 0


NOTICE_AFTER_S = 10.0  # a slow call says what it is waiting for after this long


def call_with_time_limit(
    fn: Callable[[], T], limit_s: float, waiting_for: str, expired: Callable[[], BaseException]
) -> T:
    """``fn()``, ended by raising ``expired()`` after ``limit_s`` seconds.

    In the main thread of a POSIX process whose SIGALRM is free, a timer signal interrupts
    the call even in a blocking sleep or lock; elsewhere the call runs to its end. Either
    way a call slower than `NOTICE_AFTER_S` prints one line naming ``waiting_for``, so a
    hang is never silent."""
    import threading

    done = threading.Event()

    def notice() -> None:
        if not done.wait(min(NOTICE_AFTER_S, limit_s / 2)):
            print(f"still waiting for {waiting_for} ...", file=sys.stderr, flush=True)

    threading.Thread(target=notice, daemon=True, name="qharness-notice").start()
    alarm = getattr(signal, "SIGALRM", None)
    can_alarm = (
        alarm is not None
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(alarm) in (signal.SIG_DFL, None)
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )
    if not can_alarm:
        try:
            return fn()
        finally:
            done.set()

    def expire(signum: int, frame: Any) -> None:
        raise expired()

    assert alarm is not None
    previous = signal.signal(alarm, expire)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(alarm, previous)
        done.set()
