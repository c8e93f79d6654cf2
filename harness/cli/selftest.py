"""``selftest``: the project's own gate, in a source checkout: lint, type-check, golden
integrity, benchmarks once, the self-tests and suites, the platform-dependent tests once per
simulated arch (``torch:<arch>``, no triton needed), then the canaries. Every step runs
whatever failed before it (a red job still says whether the canaries were caught), then a
summary names each step's outcome; only an interrupt stops it early."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cli.common import workers_argument
from harness.cli.pytest_child import exit_for_pytest, xdist_workers
from harness.errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]

# Modules the selftest's steps run (module -> the distribution to install): qharness[dev].
SELFTEST_TOOLS = {"ruff": "ruff", "mypy": "mypy", "yaml": "pyyaml", "hypothesis": "hypothesis"}


# The tests whose behaviour depends on the platform (they read its FP8 flavour, its native
# dispatch row, its capability expectations): run once per arch under ``torch:<arch>``, a
# short step each, so a branch taken only on a GPU arch runs on every CPU runner.
PLATFORM_DEPENDENT_TESTS: tuple[str, ...] = (
    "suites/test_platform.py",
    "tests/platform/test_capabilities.py",
    "suites/test_linear.py::test_linear",
    "suites/test_moe.py",
    "suites/test_loading.py",
    "suites/test_special_values.py",
)
# Within those files: the native paths (dispatch by the arch's row, the arch's FP8 flavour)
# and the platform's own checks; the emulated paths do not read the platform.
PLATFORM_DEPENDENT_SELECT = "native or platform"


def simulated_steps(
    archs: tuple[str, ...] | None = None,
) -> tuple[list[tuple[str, list[str]]], dict[str, dict[str, str]]]:
    """One pytest step per simulated arch over the platform-dependent tests, and the
    environment each step runs under (``QHARNESS_SIMULATE=torch:<arch>``)."""
    from harness.platform.simulate import (
        SIMULATED_ARCHS,
        TORCH,
        Simulation,
        simulation_environment,
    )

    steps: list[tuple[str, list[str]]] = []
    envs: dict[str, dict[str, str]] = {}
    for arch in archs or tuple(SIMULATED_ARCHS):
        simulation = Simulation(TORCH, arch)
        label = f"simulated {simulation.value}: platform-dependent tests"
        cmd = [sys.executable, "-m", "pytest", *PLATFORM_DEPENDENT_TESTS, "-q", "-n", "0"]
        steps.append((label, [*cmd, "-k", PLATFORM_DEPENDENT_SELECT]))
        envs[label] = simulation_environment(simulation)
    return steps, envs


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
    faulty plugin caught, every control passing); every step runs, then a summary."""
    selftest_prerequisites()
    simulated, envs = simulated_steps()
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
        *simulated,
        (
            "canaries: faulty plugins, one per bug class, each must be caught (tests/canaries)",
            [sys.executable, "-m", "tests.canaries"],
        ),
    ]
    return run_steps(steps, envs=envs)


@dataclass(frozen=True)
class StepOutcome:
    label: str
    status: int
    seconds: float

    @property
    def verdict(self) -> str:
        if self.status == 0:
            return "passed"
        if self.status == 5:
            return "no tests ran (a failure)"
        return f"failed (exit {self.status})"


def run_steps(
    steps: list[tuple[str, list[str]]],
    cwd: Path = REPO_ROOT,
    envs: Mapping[str, Mapping[str, str]] | None = None,
) -> int:
    """Run every step, print a summary of all of them, and return the exit status of the
    first that failed (a pytest step's mapped by :func:`exit_for_pytest`, 5 included).
    ``envs``: variables added to a step's environment, by its label.
    An interrupted step (Ctrl-C, SIGTERM) ends the run at once: the user asked to stop."""
    outcomes: list[StepOutcome] = []
    first_failure = EXIT_OK
    for label, cmd in steps:
        print(f"== {label}: {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        extra = (envs or {}).get(label)
        env = {**os.environ, **extra} if extra else None
        status = subprocess.call(cmd, cwd=cwd, env=env)
        outcomes.append(StepOutcome(label, status, time.monotonic() - start))
        if status in (EXIT_INTERRUPTED, -signal.SIGINT, -signal.SIGTERM):
            _print_summary(outcomes, [label for label, _ in steps[len(outcomes) :]])
            return EXIT_INTERRUPTED
        if status != 0 and first_failure == EXIT_OK:
            is_pytest = cmd[1:3] == ["-m", "pytest"]
            first_failure = exit_for_pytest(status) if is_pytest else EXIT_FAILED
    _print_summary(outcomes, [])
    return first_failure


def _print_summary(outcomes: list[StepOutcome], not_run: list[str]) -> None:
    failed = [o for o in outcomes if o.status != 0]
    stream = sys.stderr if failed or not_run else sys.stdout
    print("== selftest summary", file=stream)
    for o in outcomes:
        print(f"  {o.verdict:<26} {o.seconds:7.0f} s  {o.label}", file=stream)
    for label in not_run:
        print(f"  {'not run (interrupted)':<26} {'':>9}  {label}", file=stream)
    verdict = f"{len(failed)} of {len(outcomes)} steps failed" if failed else "every step passed"
    print(f"selftest: {verdict}" + (", interrupted" if not_run else ""), file=stream, flush=True)
