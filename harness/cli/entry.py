"""``main``: the one entry point (``python -m harness`` and the ``qharness`` script). It
checks the environment a command will use, runs the command, and turns every error into
one line on stderr and an exit status: a deliberate error its own, a plugin's fault named,
a bug one line (exit 3) with the traceback behind QHARNESS_TRACEBACK."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.cli.common import working_directory
from harness.cli.parser import build_parser
from harness.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    QHarnessError,
    filesystem_fault,
)

TRACEBACK_VARIABLE = "QHARNESS_TRACEBACK"
# Commands that never import torch: they run from a deleted working directory when every
# path they are given is absolute. Every other command checks the directory first.
TORCH_FREE_COMMANDS = frozenset({"report", "history"})


def _validate_environment(args: argparse.Namespace) -> None:
    """Environment values the command will use, checked before it starts anything."""
    if args.command not in TORCH_FREE_COMMANDS:
        working_directory()  # torch's import dies in a deleted one, naming no cause
    if args.command in ("run", "selftest"):
        from harness.platform.devices import gpu_list_from_environment
        from harness.platform.runner import runner_label

        gpu_list_from_environment(os.environ)
        runner_label(os.environ)
    if args.command in ("run", "platform") and getattr(args, "simulate", None) is None:
        from harness.platform.simulate import simulation_from_environment

        simulation_from_environment(os.environ)  # a bad QHARNESS_SIMULATE: usage error


def _plugin_fault(exc: BaseException) -> str | None:
    """The plugin whose code raised ``exc`` (its innermost frame in a plugin's package)."""
    from harness.registry import plugin_owning

    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        module = str(frame.f_globals.get("__name__", ""))
        owner = plugin_owning(module) if module.split(".")[0] != "harness" else None
        if owner is not None:
            where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
            return f"{owner} raised {type(exc).__name__} at {where}"
    return None


def _internal_error(exc: BaseException) -> int:
    """One line naming the exception and where it was raised, and how to see the traceback;
    an exception raised by a plugin's code names the plugin instead (exit 2)."""
    import traceback

    if os.environ.get(TRACEBACK_VARIABLE):
        traceback.print_exception(exc)
    message = " ".join(str(exc).split()) or "(no message)"
    plugin = _plugin_fault(exc)
    if plugin is not None:
        print(f"error: plugin fault: {plugin}: {message[:300]}", file=sys.stderr)
        return EXIT_USAGE
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    print(
        f"internal error: {type(exc).__name__}{where}: {message[:300]} -- this is a bug in "
        f"qharness; rerun with {TRACEBACK_VARIABLE}=1 for the traceback and report it",
        file=sys.stderr,
    )
    return EXIT_INTERNAL


def _tolerate_narrow_output_encodings() -> None:
    """A name the terminal's encoding cannot show (an ASCII-only locale, a non-ASCII plugin
    name) is printed as a backslash escape, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _stdout_closed() -> int:
    """The reader of stdout left (``schemes | head -c 10``): no message and the shell's
    status for a SIGPIPE-killed command, as any pipeline tool; stdout goes to /dev/null so
    the interpreter's last flush does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    _tolerate_narrow_output_encodings()
    args = build_parser().parse_args(argv)
    try:
        _validate_environment(args)
        status: int = args.func(args)
        sys.stdout.flush()  # a closed pipe is found here, not in the interpreter's exit
    except BrokenPipeError:
        return _stdout_closed()
    except QHarnessError as exc:
        print(f"error: {' '.join(str(exc).splitlines())}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the one place a bug becomes one line and exit 3
        fault = filesystem_fault(exc)
        if fault is None:
            return _internal_error(exc)
        print(f"error: {fault}", file=sys.stderr)
        return fault.exit_code
    return status
