"""``selftest``: the project's own gate, in a source checkout: lint, type-check, golden
integrity, benchmarks once, the self-tests and suites, then the canaries; the first failing
step stops it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import workers_argument
from harness.cli.pytest_child import exit_for_pytest, xdist_workers
from harness.errors import EXIT_FAILED, EXIT_OK, UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]

# Modules the selftest's steps run (module -> the distribution to install): qharness[dev].
SELFTEST_TOOLS = {"ruff": "ruff", "mypy": "mypy", "yaml": "pyyaml", "hypothesis": "hypothesis"}


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("selftest", help="lint, type-check and run every test", pass_through=True)
    p.add_argument(
        "--workers", default="auto", type=workers_argument, help="pytest-xdist workers, 0 for none"
    )
    p.set_defaults(func=cmd_selftest, pytest_args=[])
    p.epilog = "Every other argument (or all after --) goes to the final pytest step."


def selftest_prerequisites() -> None:
    """A UsageError naming what to install (or where to run) before any step starts: the
    selftest needs the development tools and the checkout's tests/."""
    import importlib.util

    missing = sorted(
        dist for mod, dist in SELFTEST_TOOLS.items() if not importlib.util.find_spec(mod)
    )
    if missing:
        raise UsageError(
            f"selftest needs {', '.join(missing)}: pip install {' '.join(missing)} (or, in a "
            "checkout, pip install -e '.[dev]')"
        )
    if not (REPO_ROOT / "tests").is_dir():
        raise UsageError(
            "selftest runs the project's own tests/, which an installed wheel does not carry: "
            "run it in a source checkout (pip install -e '.[dev]'); `python -m harness run` "
            "runs the suites from the wheel"
        )


def cmd_selftest(args: argparse.Namespace) -> int:
    """Lint, type-check, golden integrity, self-tests and suites, then the canaries (every
    faulty plugin caught, every control passing); the first failure stops it."""
    selftest_prerequisites()
    steps: list[tuple[str, list[str]]] = [
        ("ruff check", [sys.executable, "-m", "ruff", "check", "."]),
        ("ruff format", [sys.executable, "-m", "ruff", "format", "--check", "."]),
        ("mypy", [sys.executable, "-m", "mypy"]),
        ("golden check", [sys.executable, "-m", "harness", "golden", "check"]),
        (
            "benchmarks, once each (timings are taken by `pytest benchmarks --benchmark-only`)",
            [sys.executable, "-m", "pytest", "benchmarks", "-q", "--benchmark-disable"],
        ),
        (
            "pytest",
            [
                sys.executable,
                "-m",
                "pytest",
                "tests",
                "suites",
                *xdist_workers(args.workers),
                *args.pytest_args,
            ],
        ),
        (
            "canaries: faulty plugins, one per bug class, each must be caught (tests/canaries)",
            [sys.executable, "-m", "tests.canaries"],
        ),
    ]
    for label, cmd in steps:
        print(f"== {label}: {' '.join(cmd[1:])}", flush=True)
        status = subprocess.call(cmd, cwd=REPO_ROOT)
        if status == 5:
            print(f"{label}: no tests ran, which counts as a failure", file=sys.stderr)
            return EXIT_FAILED
        if status != 0:
            print(f"{label} failed (exit {status})", file=sys.stderr)
            return exit_for_pytest(status) if cmd[2] == "pytest" else EXIT_FAILED
    return EXIT_OK
