"""Helpers several commands share: JSON output, paths named on the command line, the reports
directory, ``--simulate`` and ``--workers``. Kept apart so no command imports another."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from harness.errors import UsageError

SIMULATE_HELP = (
    "simulate a GPU arch on this CPU: triton-interpret:ARCH runs its Triton kernel source "
    "under Triton's interpreter (sets TRITON_INTERPRET=1; needs triton installed); "
    "torch:ARCH runs the pure-torch paths under its expectations (no triton); ARCH is "
    "gfx942, gfx950 or sm_90 (sets QHARNESS_SIMULATE)"
)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


def working_directory() -> Path:
    """The caller's working directory, or a usage error when it was deleted (a shell left
    in a removed folder): torch's import dies there with an unnamed cause."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise UsageError(
            "the working directory no longer exists (deleted after the shell entered it); "
            "cd to an existing directory and rerun"
        ) from None


def caller_path(value: str) -> Path:
    """A path from the command line, relative to the caller's working directory (an
    absolute path needs none: it works from a deleted one); a symlink loop on the way is a
    `UsageError` naming it (pathlib's own error is a RuntimeError)."""
    path = Path(value).expanduser()
    try:
        return (path if path.is_absolute() else working_directory() / path).resolve()
    except RuntimeError as exc:  # "Symlink loop from ..." (Python < 3.13)
        raise UsageError(
            f"{value}: a symlink loop ({exc}); name a real file or directory"
        ) from None


def output_path(value: str) -> Path:
    """An output named on the command line: absolute, its links kept (``/dev/stdout`` into a
    pipe resolves to no path at all; `harness.report.outputs.targets` follows links itself)."""
    path = Path(value).expanduser()
    return Path(os.path.abspath(path if path.is_absolute() else working_directory() / path))


def default_reports_dir() -> Path:
    """``reports/`` of the checkout, or ``./reports`` when running from an installed wheel."""
    from harness.store.locations import CHECKOUT_ROOT, is_checkout

    return CHECKOUT_ROOT / "reports" if is_checkout() else working_directory() / "reports"


def apply_simulation(args: argparse.Namespace) -> None:
    """``--simulate SIMULATOR:ARCH``: validated (a usage error otherwise), then put in this
    process's environment, which the pytest child inherits (with ``TRITON_INTERPRET=1``),
    before anything detects the platform."""
    value = getattr(args, "simulate", None)
    if value is None:
        return
    from harness.platform.simulate import parse_simulation, simulation_environment

    os.environ.update(simulation_environment(parse_simulation(value, source="--simulate")))


def workers_argument(value: str) -> str:
    """``--workers``: "auto" or a non-negative count (pytest-xdist's ``-n``)."""
    if value == "auto" or (value.isascii() and value.isdigit()):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is not 'auto' or a non-negative integer")
