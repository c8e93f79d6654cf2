"""``run``: every suite on this platform, as a pytest child, into a new run directory under
reports/; then the benchmarks (``--bench``) and the run's reports. A run interrupted before
any result was recorded leaves no directory behind, and ``latest`` as it was."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli.common import (
    SIMULATE_HELP,
    apply_simulation,
    caller_path,
    default_reports_dir,
    output_path,
    workers_argument,
)
from harness.cli.pytest_args import check_keyword_expression, passed_to_pytest, selection
from harness.cli.pytest_child import (
    CONCISE_PYTEST,
    PYTEST_INTERRUPTED,
    PYTEST_USAGE,
    exit_for_pytest,
    run_pytest,
    xdist_workers,
)
from harness.cli.run_reports import finish_run
from harness.errors import EXIT_FAILED, FileSystemError, UsageError

if TYPE_CHECKING:  # the CLI imports the core lazily, per command
    from harness.platform.workers import WorkerPlan


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "run", help="run all suites on this platform into reports/<run-id>/", pass_through=True
    )
    p.add_argument("--out", help="also write the results file here")
    p.add_argument(
        "--reports-dir",
        help="where run directories go (default: the checkout's reports/, or ./reports "
        "when installed)",
    )
    p.add_argument("--bench", action="store_true", help="then run the benchmarks, serially")
    p.add_argument(
        "--full-report",
        action="store_true",
        help="end with the full text report (outcomes, skips, SQNR, memory) instead of counts",
    )
    p.add_argument(
        "--runner-label",
        help="this runner's name in reports and history (default: $QHARNESS_RUNNER); runs of "
        "one platform with different labels get their own column and baselines",
    )
    p.add_argument(
        "--workers",
        default="auto",
        type=workers_argument,
        help="pytest-xdist workers, 0 for none; auto: one per visible GPU (each pinned to its "
        "own) on a GPU runner, one per core on a CPU",
    )
    p.add_argument("--simulate", metavar="SIMULATOR:ARCH", help=SIMULATE_HELP)
    p.set_defaults(func=cmd_run, pytest_args=[])
    p.epilog = (
        "Our options may stand anywhere; every other argument (and all after --) goes to "
        "pytest, e.g. -k fp8_per_tensor."
    )


def worker_plan(requested: str) -> WorkerPlan:
    """``--workers``: on a GPU runner ``auto`` is one pinned worker per visible GPU
    (`harness.platform.workers`)."""
    from harness.platform.workers import plan_workers, visible_gpu_count

    gpus = visible_gpu_count() if requested == "auto" else 0
    return plan_workers(requested, os.environ, gpus)


def _load_plugins() -> None:
    """Load every registered plugin before a run directory exists: a faulty one is one line
    naming its entry point (`PluginError`), not a collection error inside pytest."""
    from harness.linear.paths import linear_paths
    from harness.loading.loaders import loaders
    from harness.moe.paths import moe_paths
    from harness.quantizers import quantizers

    for registry in (linear_paths, moe_paths, loaders, quantizers):
        registry()


def _interrupt_on_sigterm() -> None:
    """Until a pytest child takes over, SIGTERM interrupts the CLI as Ctrl-C does (130)."""
    import signal

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def _discard_if_empty(run: Any) -> None:
    """Remove the directory of a run interrupted before any test ran. pytest may still have
    written its session files on the way out (a junit file and a results file without a
    record); those are the run's own and say nothing, so they go too. Anything else, or a
    results file with a record or that does not parse, keeps the directory."""
    import contextlib
    import json

    try:
        records = json.loads(run.results.read_text()).get("records")
    except FileNotFoundError:
        records = []
    except (OSError, ValueError, AttributeError):
        return  # unreadable: not ours to judge, kept
    if records:
        return
    for file in (run.results, run.junit):
        with contextlib.suppress(FileNotFoundError):
            file.unlink()
    for directory in (run.repro, run.path):
        with contextlib.suppress(OSError):  # absent, or not empty: kept
            directory.rmdir()


def cmd_run(args: argparse.Namespace) -> int:
    _interrupt_on_sigterm()
    from harness.platform.info import detect
    from harness.platform.runner import RUNNER_VARIABLE, check_label
    from harness.report.outputs.targets import Outputs
    from harness.report.reading.rundir import LATEST_JSON, create_run_dir, new_run_id

    reports = caller_path(args.reports_dir) if args.reports_dir else default_reports_dir()
    out = output_path(args.out) if args.out else None
    if out is not None and out.resolve() == (reports / LATEST_JSON).resolve():
        raise UsageError(f"--out {args.out}: `run` keeps {out} itself; name another file")
    Outputs({"--out": out})  # refused now, not after the whole run
    check_keyword_expression(passed_to_pytest(args))
    apply_simulation(args)  # before plugins import their kernels
    _load_plugins()
    run = create_run_dir(reports, new_run_id(detect().to_json()))
    plan = worker_plan(args.workers)
    if args.runner_label:
        plan.environment[RUNNER_VARIABLE] = check_label(args.runner_label, "--runner-label")
    try:
        return _run_in(run, args, reports, out, plan)
    except KeyboardInterrupt:
        _discard_if_empty(run)
        raise


def _run_in(
    run: Any, args: argparse.Namespace, reports: Path, out: Path | None, plan: WorkerPlan
) -> int:
    """`run` once its run directory exists: pytest, benchmarks, the run's reports."""
    from harness.store.locations import (
        benchmarks_dir,
        content_root,
        golden_root,
        is_checkout,
        suites_dir,
    )

    if plan.explanation:
        print(f"workers: {plan.workers} ({plan.explanation})", flush=True)
    root = content_root()
    cmd = [
        sys.executable, "-m", "pytest", str(suites_dir()), f"--rootdir={root}",
        f"--qharness-results={run.results}", f"--junitxml={run.junit}",
        f"--qharness-golden={golden_root()}", f"--qharness-repro={run.repro}",
        "-o", "xfail_strict=true", "-q", *CONCISE_PYTEST, *xdist_workers(plan.workers),
        *passed_to_pytest(args),
    ]  # fmt: skip
    if not is_checkout():  # never write pytest's cache into an installed package
        cmd[3:3] = ["-p", "no:cacheprovider"]
    status = run_pytest(cmd, root, plan.environment)
    _junit_per_suite(run.junit, root)
    bench_failed = False
    if args.bench and status in (0, 1):
        bench = [
            sys.executable, "-m", "pytest", str(benchmarks_dir()), f"--rootdir={root}",
            "-p", "no:xdist", "--benchmark-only", f"--benchmark-json={run.benchmark}", "-q",
            *selection(passed_to_pytest(args)),
        ]  # fmt: skip
        bench_status = run_pytest(bench, root)
        if run.benchmark.is_file() and run.benchmark.stat().st_size == 0:
            run.benchmark.unlink()  # pytest-benchmark leaves an empty file when none ran
        if bench_status not in (0, 5):
            print(f"benchmarks failed (pytest exit {bench_status})", file=sys.stderr)
            bench_failed = True
    print(f"run directory: {run.path}")
    _refuse_rescued_results(run)
    if run.results.exists() and _promotes_to_latest(status, run.results):
        print(finish_run(run, reports, out, full=args.full_report))
    elif status == PYTEST_INTERRUPTED:
        _discard_if_empty(run)
        print(f"interrupted before any result was recorded: {reports / 'latest'} left as it "
              "was", file=sys.stderr)  # fmt: skip
    elif status == PYTEST_USAGE:  # pytest has said why; its empty run directory goes
        _discard_if_empty(run)
        print(f"pytest refused its arguments: {reports / 'latest'} left as it was",
              file=sys.stderr)  # fmt: skip
    else:
        print(f"no results recorded: {reports / 'latest'} left as it was", file=sys.stderr)
    if status == 5:
        print("no tests ran: treating as a failure", file=sys.stderr)
        return EXIT_FAILED
    if bench_failed and status == 0:
        return EXIT_FAILED
    return exit_for_pytest(status)


def _junit_per_suite(junit: Path, root: Path) -> None:
    """One testsuite per suite file in the run's junit.xml, as CI viewers group them; a
    file that cannot be read or rewritten is kept as pytest wrote it, and says so."""
    import xml.etree.ElementTree as ET

    from harness.report.outputs.junit_suites import split_by_file

    if not junit.is_file():
        return
    try:
        split_by_file(junit, root)
    except (OSError, ET.ParseError) as exc:
        print(f"{junit}: kept as pytest wrote it (one testsuite): {exc}", file=sys.stderr)


def _refuse_rescued_results(run: Any) -> None:
    """A run whose results could not be written into its run directory (read-only, full)
    ends with the place they were kept instead (`harness.report.reading.results.rescue_path`)."""
    from harness.report.reading.results import rescue_path

    kept = rescue_path(run.results)
    if not run.results.exists() and kept.is_file():
        raise FileSystemError(
            f"{run.results} could not be written; the run's results are kept in {kept}"
        )


def _promotes_to_latest(status: int, out: Path) -> bool:
    """Only a run whose pytest collected tests and wrote records becomes reports/latest.json:
    a usage error, an internal error or "no tests ran" (a mistyped -k) never replaces it."""
    if status in (3, 4, 5):
        return False
    from harness.report.reading.results import ResultsError, read_results

    try:
        return bool(read_results(out)["records"])
    except ResultsError:
        return False
