"""``python -m harness run|platform|schemes|golden|report|selftest``.

These names, their options and their JSON outputs are a contract users script against;
docs/CLI.md documents them. Exit status: 0 ok, 1 a check or test failed (or a regression was
flagged), 2 bad input, 3 an unexpected internal error, 4 the file system refused a read or
write, 130 interrupted. Errors are one line on
stderr; never a traceback (set QHARNESS_TRACEBACK=1 to see one for an internal error).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    FileSystemError,
    QHarnessError,
    UnsafePathError,
    UsageError,
    filesystem_fault,
)
from harness.store.locations import golden_root as shipped_golden_root

if TYPE_CHECKING:  # the CLI imports the core lazily, per command
    from harness.core.spec import QuantSpec
    from harness.platform.workers import WorkerPlan

REPO_ROOT = Path(__file__).resolve().parent.parent
__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "main",
]
TRACEBACK_VARIABLE = "QHARNESS_TRACEBACK"
SIMULATE_HELP = (
    "simulate a GPU arch on this CPU with Triton's interpreter: triton-interpret:gfx942, "
    "triton-interpret:gfx950 or triton-interpret:sm_90 (sets QHARNESS_SIMULATE and "
    "TRITON_INTERPRET=1; needs triton installed)"
)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


# --------------------------------------------------------------------- platform
def platform_report() -> dict[str, Any]:
    """Platform, probed capabilities vs expectations, and the native support matrix."""
    from harness.linear.matrix import linear_dispatch_report, support_matrix
    from harness.moe.dispatch_report import moe_dispatch_report
    from harness.platform.capabilities import capabilities, expected, expected_key
    from harness.platform.info import detect

    info = detect()
    caps = capabilities(info)
    exp = expected(info)
    return {
        "platform": info.to_json(),
        "capabilities": {
            name: {"available": c.available, "expected": name in exp, "detail": c.detail}
            for name, c in caps.items()
        },
        "expected_missing": sorted(n for n in exp if not caps[n].available),
        "expected_row": expected_key(info),
        "support": support_matrix(info),
        "linear_dispatch": linear_dispatch_report(info),
        "moe_dispatch": moe_dispatch_report(info),
    }


def apply_simulation(args: argparse.Namespace) -> None:
    """``--simulate SIMULATOR:ARCH``: validated (a usage error otherwise), then put in this
    process's environment, which the pytest child inherits (with ``TRITON_INTERPRET=1``),
    before anything detects the platform."""
    value = getattr(args, "simulate", None)
    if value is None:
        return
    from harness.platform.simulate import parse_simulation, simulation_environment

    os.environ.update(simulation_environment(parse_simulation(value, source="--simulate")))


def cmd_platform(args: argparse.Namespace) -> int:
    apply_simulation(args)
    report = platform_report()
    if args.json:
        _print_json(report)
        return EXIT_OK
    p = report["platform"]
    print(f"device       {p['device']}  (is_cuda_alike={p['is_cuda_alike']})")
    print(f"arch         {p['arch']}  {p['name']}")
    print(f"torch        {p['torch_version']}  cuda={p['cuda_version']}  hip={p['hip_version']}")
    print(f"fp8 dtype    {p['fp8_dtype']}")
    simulated = p.get("simulated")
    print(f"simulated    {simulated or 'no (real hardware)'}  platform key {p['platform_key']}")
    print(f"\ncapabilities (tiny ops run here; expected: row {report['expected_row']!r})")
    for name, c in report["capabilities"].items():
        mark = "yes" if c["available"] else "no "
        exp = "expected" if c["expected"] else ""
        detail = "" if c["available"] else c["detail"]
        print(f"  {mark}  {name:<36} {exp:<9}{detail}".rstrip())
    if report["expected_missing"]:
        print(f"\nEXPECTED BUT MISSING: {', '.join(report['expected_missing'])}")
    print("\nsupport matrix (scheme x path; reasons for emulated-only)")
    for scheme, paths in report["support"].items():
        cells = ", ".join(
            f"{path}: {'yes' if s['supported'] else 'no'}" for path, s in paths.items()
        )
        print(f"  {scheme:<32} {cells}")
        for path, s in paths.items():
            if not s["supported"]:
                print(f"      {path}: {s['reason']}")
    for problem in report["linear_dispatch"]["problems"]:
        print(f"  LINEAR TABLE PROBLEM: {problem}")
    _print_moe_dispatch(report["moe_dispatch"])
    return EXIT_OK


def _print_moe_dispatch(moe: dict[str, Any]) -> None:
    """The MoE native-dispatch table: this platform's decisions, then every row."""
    print(f"\nMoE native dispatch (table row {moe['platform_key']!r}; harness/moe/dispatch.py)")
    for scheme, d in moe["schemes"].items():
        runs = "native runs here" if d["native_runs_here"] else f"not native: {d['reason']}"
        print(f"  {scheme:<32} {d['decision'] or 'NO DECISION':<28} {runs}")
    print("  table:")
    for key, row in moe["table"].items():
        cells = "; ".join(f"{dec}: {', '.join(names) or '-'}" for dec, names in row.items())
        print(f"    {key:<8} {cells}")
    for problem in moe["problems"]:
        print(f"  TABLE PROBLEM: {problem}")


# ---------------------------------------------------------------------- schemes
def _activation_timing(spec: QuantSpec) -> str:
    """When an activation's scales are made: a two-level format has a calibrated global
    scale and per-call block scales."""
    if spec.scale_fmt.per_tensor_level:
        return "static global, dynamic blocks"
    return "dynamic" if spec.dynamic else "static"


def cmd_schemes(args: argparse.Namespace) -> int:
    from harness.core.schemes import SCHEMES, get_scheme

    names = args.names or sorted(SCHEMES)
    schemes = [get_scheme(n) for n in names]  # UnknownSchemeError -> usage error
    if args.json:
        _print_json([s.to_json() for s in schemes])
        return EXIT_OK
    width = max(len(s.name) for s in schemes)
    for s in schemes:
        w = s.weight
        a = s.activation
        act = "unquantized" if a is None else f"{a.format} {a.granularity} {_activation_timing(a)}"
        print(
            f"{s.name:<{width}}  W {w.format} {w.granularity} "
            f"scale {w.scale_format}/{w.scale_rounding} | A {act} | SQNR >= {s.sqnr_floor_db} dB"
        )
    return EXIT_OK


# ----------------------------------------------------------------------- golden
def cmd_golden(args: argparse.Namespace) -> int:
    from harness.catalog import golden_builders
    from harness.store.golden import GoldenError, GoldenStore

    store = GoldenStore(_golden_root(args.root), entry_builders=golden_builders())
    if args.action == "refresh":
        try:
            changes = store.refresh(only=args.only)
        except GoldenError as exc:
            raise UsageError(str(exc)) from exc
        counts: dict[str, int] = {}
        for c in changes:
            counts[c.status] = counts.get(c.status, 0) + 1
        print("refresh: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return EXIT_OK
    try:
        problems = store.check(recompute=not args.no_recompute, only=args.only)
    except GoldenError as exc:
        raise UsageError(str(exc)) from exc
    if problems:
        print(f"golden check FAILED ({len(problems)} problem(s)):", file=sys.stderr)
        for line in problems:
            print(f"  - {line}", file=sys.stderr)
        return EXIT_FAILED
    print(f"golden check passed: {store.root}")
    return EXIT_OK


# -------------------------------------------------------------------------- run
def _xdist_workers(requested: str) -> list[str]:
    """pytest arguments for ``requested`` workers; benchmarks need a serial run, so they are
    switched off under xdist (run them with `pytest benchmarks --benchmark-only`)."""
    if requested == "0":
        return []
    return ["-n", requested, "-p", "no:benchmark"]


def worker_plan(requested: str) -> WorkerPlan:
    """``--workers``: on a GPU runner ``auto`` is one pinned worker per visible GPU
    (`harness.platform.workers`)."""
    from harness.platform.workers import plan_workers, visible_gpu_count

    gpus = visible_gpu_count() if requested == "auto" else 0
    return plan_workers(requested, os.environ, gpus)


def _caller_path(value: str) -> Path:
    """A path from the command line, relative to the caller's working directory."""
    return (Path.cwd() / Path(value).expanduser()).resolve()


def default_reports_dir() -> Path:
    """``reports/`` of the checkout, or ``./reports`` when running from an installed wheel."""
    from harness.store.locations import CHECKOUT_ROOT, is_checkout

    return CHECKOUT_ROOT / "reports" if is_checkout() else Path.cwd() / "reports"


INHERITED_PYTEST_VARIABLES = frozenset(
    {
        "PYTEST_XDIST_WORKER",
        "PYTEST_XDIST_WORKER_COUNT",
        "PYTEST_XDIST_TESTRUNUID",
        "PYTEST_CURRENT_TEST",
    }
)


def _run_pytest(cmd: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> int:
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


def _pytest_args(args: argparse.Namespace) -> list[str]:
    """Extra pytest arguments, without the ``--`` that may separate them from ours."""
    extra = list(getattr(args, "pytest_args", None) or [])
    return extra[1:] if extra[:1] == ["--"] else extra


def _selection(pytest_args: list[str]) -> list[str]:
    """The ``-k EXPR`` of the suites' arguments, which also selects the benchmarks."""
    for i, arg in enumerate(pytest_args):
        if arg == "-k" and i + 1 < len(pytest_args):
            return ["-k", pytest_args[i + 1]]
        joined = re.fullmatch(r"-k(.+)", arg)  # pytest also takes -kEXPR
        if joined:
            return ["-k", joined[1]]
    return []


def _check_keyword_expression(pytest_args: list[str]) -> None:
    """Refuse a ``-k`` pytest cannot parse before any run directory exists: serially pytest
    stops with a usage error, but under xdist every worker crashes on it (INTERNALERROR).
    Scheme variants carry an ``@`` that the -k grammar has no place for."""
    selection = _selection(pytest_args)
    if not selection:
        return
    try:
        from _pytest.mark import expression
    except ImportError:  # a pytest without this module: pytest itself will judge
        return
    # pytest 9 raises SyntaxError; older ones their own ParseError
    errors = (SyntaxError, getattr(expression, "ParseError", SyntaxError))
    try:
        expression.Expression.compile(selection[1])
    except errors as exc:
        hint = ""
        if "@" in selection[1]:
            hint = (
                "; -k cannot hold '@': select a scheme variant such as "
                "w_mxfp4_a_mxfp4@ceil with -k 'w_mxfp4_a_mxfp4 and ceil'"
            )
        raise UsageError(f"-k {selection[1]!r}: {exc}{hint}") from None


def cmd_run(args: argparse.Namespace) -> int:
    _interrupt_on_sigterm()
    from harness.platform.info import detect
    from harness.platform.runner import RUNNER_VARIABLE, check_label
    from harness.report.rundir import LATEST_JSON, create_run_dir, new_run_id

    reports = _caller_path(args.reports_dir) if args.reports_dir else default_reports_dir()
    out = _caller_path(args.out) if args.out else None
    if out is not None and out == (reports / LATEST_JSON).resolve():
        raise UsageError(f"--out {args.out}: `run` keeps {out} itself; name another file")
    if out is not None and out.is_dir():
        raise UsageError(f"--out {args.out} is a directory; give a file name")
    _check_keyword_expression(_pytest_args(args))
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
        "-o", "xfail_strict=true", "-q", *CONCISE_PYTEST, *_xdist_workers(plan.workers),
        *_pytest_args(args),
    ]  # fmt: skip
    if not is_checkout():  # never write pytest's cache into an installed package
        cmd[3:3] = ["-p", "no:cacheprovider"]
    status = _run_pytest(cmd, root, plan.environment)
    bench_failed = False
    if args.bench and status in (0, 1):
        bench = [
            sys.executable, "-m", "pytest", str(benchmarks_dir()), f"--rootdir={root}",
            "-p", "no:xdist", "--benchmark-only", f"--benchmark-json={run.benchmark}", "-q",
            *_selection(_pytest_args(args)),
        ]  # fmt: skip
        bench_status = _run_pytest(bench, root)
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
    elif status != 2:  # a usage error has said why already
        print(f"no results recorded: {reports / 'latest'} left as it was", file=sys.stderr)
    if status == 5:
        print("no tests ran: treating as a failure", file=sys.stderr)
        return EXIT_FAILED
    if bench_failed and status == 0:
        return EXIT_FAILED
    return exit_for_pytest(status)


def _refuse_rescued_results(run: Any) -> None:
    """A run whose results could not be written into its run directory (read-only, full)
    ends with the place they were kept instead (`harness.report.results.rescue_path`)."""
    from harness.report.results import rescue_path

    kept = rescue_path(run.results)
    if not run.results.exists() and kept.is_file():
        raise FileSystemError(
            f"{run.results} could not be written; the run's results are kept in {kept}"
        )


def finish_run(run: Any, reports: Path, out: Path | None, full: bool = True) -> str:
    """What a run does once its pytest wrote results: summary.md and report.html, the
    ``latest`` pointer, the ``--out`` copy; returns what to print: the text report
    (``full``) or the few lines of `run_digest`."""
    from harness.report.render import render_report
    from harness.report.rundir import update_latest
    from harness.store.atomic import write_bytes_atomic

    try:
        write_run_reports(run)
        update_latest(reports, run)
        if out is not None:
            write_bytes_atomic(out, run.results.read_bytes())
            print(f"results also written to {out}")
    except OSError as exc:
        fault = filesystem_fault(exc)
        if fault is None:
            raise
        raise FileSystemError(f"{fault}; the run's results are kept in {run.results}") from exc
    if not full:
        return run_digest(run)
    return render_report(run.results, baseline=None, max_rows=40)


# A green run's output stays short: pytest lists failures and errors only (the project's -ra
# would list every skip again after qharness's "skips by reason"); the details are files.
CONCISE_PYTEST = ("-rfE",)


def run_digest(run: Any) -> str:
    """The few lines `run` ends with: the outcome counts and where the details are."""
    from harness.report.results import read_results

    summary = read_results(run.results)["summary"]
    counts = ", ".join(f"{n} {o}" for o, n in summary["outcomes"].items()) or "no tests"
    reasons = len(summary["skip_reasons"])
    skips = f" ({reasons} skip reason(s), counted above)" if reasons else ""
    return (
        f"qharness: {counts}{skips}\n"
        f"details: {run.summary} (summary), {run.html} (matrix, skips, plots), "
        f"{run.results}; `report --results {run.results}` prints the full text report"
    )


def write_run_reports(run: Any, history: Path | None = None) -> None:
    """summary.md and report.html of one run directory (vs its history when given)."""
    from harness.report.html_page import render_html
    from harness.report.markdown import summary_markdown
    from harness.report.nightly import build_report
    from harness.report.runs import open_history
    from harness.store.atomic import write_text_atomic

    report = build_report([run.path], open_history(history) if history else None)
    write_text_atomic(run.summary, summary_markdown(report))
    write_text_atomic(run.html, render_html(report, run.html))


# pytest's exit statuses (pytest.ExitCode) and this CLI's: pytest's 2-4 would otherwise collide
# with "bad input" and "internal error".
PYTEST_INTERRUPTED = 2
_PYTEST_EXIT = {0: EXIT_OK, 1: EXIT_FAILED, 2: EXIT_INTERRUPTED, 3: EXIT_INTERNAL, 4: EXIT_USAGE}


def exit_for_pytest(status: int) -> int:
    """This CLI's exit status for a pytest exit status (5, no tests ran, is a failure)."""
    return _PYTEST_EXIT.get(status, EXIT_FAILED)


def _promotes_to_latest(status: int, out: Path) -> bool:
    """Only a run whose pytest collected tests and wrote records becomes reports/latest.json:
    a usage error, an internal error or "no tests ran" (a mistyped -k) never replaces it."""
    if status in (3, 4, 5):
        return False
    from harness.report.results import ResultsError, read_results

    try:
        return bool(read_results(out)["records"])
    except ResultsError:
        return False


def _golden_root(root: str) -> Path:
    """``--root``: a directory path, never a file, a NUL or the file-system root."""
    if not root or "\0" in root:
        raise UsageError(f"--root {root!r} is not a usable directory path")
    path = Path(root).expanduser()
    resolved = path.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise UnsafePathError(f"--root {root} is a file-system root or the home directory")
    if path.exists() and not path.is_dir():
        raise UsageError(f"--root {root} is not a directory")
    return path


# ----------------------------------------------------------------------- report
def _report_inputs(args: argparse.Namespace) -> list[Path]:
    """The runs to report: RUN arguments, else --results, else reports/latest."""
    from harness.report.rundir import resolve_latest

    if args.runs:
        return [_caller_path(r) for r in args.runs]
    if args.results:
        return [_caller_path(args.results)]
    reports = default_reports_dir()
    latest = resolve_latest(reports)
    if latest is not None and latest.results.is_file():
        return [latest.results]
    return [reports / "latest.json"]


def _refuse_results_target(path: Path, what: str) -> None:
    """Never overwrite a results file (or anything JSON) with a report."""
    if path.suffix.lower() == ".json" or path.name == "results.json":
        raise UsageError(f"{what} {path}: refusing to write a report over a JSON file")
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; give a file name")


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.html_page import render_html
    from harness.report.markdown import full_markdown, summary_markdown
    from harness.report.nightly import build_report
    from harness.report.render import render_report
    from harness.report.runs import open_history
    from harness.store.atomic import write_text_atomic

    runs = _report_inputs(args)
    baseline = _caller_path(args.baseline) if args.baseline else None
    out = _caller_path(args.out) if args.out else None
    html_out = _caller_path(args.html) if args.html else None
    summary_out = _caller_path(args.summary) if args.summary else None
    for path, what in ((out, "--out"), (html_out, "--html"), (summary_out, "--summary")):
        if path is not None:
            _refuse_results_target(path, what)
    history = open_history(_caller_path(args.history)) if args.history else None
    report = build_report(runs, history, baseline)
    legacy = len(runs) == 1 and not args.runs and history is None
    text = render_report(runs[0], baseline=baseline) if legacy else full_markdown(report)
    if out is not None:
        write_text_atomic(out, text)
        print(f"report written to {out}")
    else:
        print(text)
    if html_out is not None and args.csp_safe:
        from harness.report.csp import write_csp_safe

        extra = write_csp_safe(render_html(report, html_out), html_out)
        print(f"html report written to {html_out} (CSP-safe; {len(extra)} asset file(s) beside it)")
    elif html_out is not None:
        write_text_atomic(html_out, render_html(report, html_out))
        print(f"html report written to {html_out}")
    if summary_out is not None:
        link = os.path.relpath(html_out, summary_out.parent) if html_out else None
        write_text_atomic(summary_out, summary_markdown(report, link))
        print(f"summary written to {summary_out}")
    if args.github_annotations:
        from harness.report.annotations import github_annotations

        for line in github_annotations(report):
            print(line)
    if report.regressions and args.fail_on_regression:
        print(f"{len(report.regressions)} regression(s)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# ---------------------------------------------------------------------- history
def cmd_history(args: argparse.Namespace) -> int:
    from harness.report.runs import add_runs, open_history

    history = open_history(_caller_path(args.history))
    if args.action == "list":
        for run_id in history.run_ids():
            print(run_id)
        return EXIT_OK
    if not args.runs:
        raise UsageError("history add: name at least one run directory or results file")
    for outcome in add_runs(history, [_caller_path(r) for r in args.runs]):
        detail = f": {outcome.detail}" if outcome.detail else ""
        stream = sys.stderr if outcome.status == "skipped" else sys.stdout
        print(f"{outcome.run}: {outcome.status}{detail}", file=stream)
    print(f"history {history.root}: {len(history.run_ids())} run(s)")
    return EXIT_OK


# ------------------------------------------------------------------------ repro
def _rerunners() -> dict[str, Any]:
    """Bundle kind -> the function that re-runs it (kinds are written by `repro_case`)."""
    from harness.linear.repro import rerun_linear

    return {"linear": rerun_linear}


def cmd_repro(args: argparse.Namespace) -> int:
    from harness.store.repro import ReproError, read_bundle

    bundle = read_bundle(_caller_path(args.bundle))
    kind = str(bundle.meta.get("kind"))
    rerun = _rerunners().get(kind)
    if rerun is None:
        raise ReproError(f"{args.bundle}: no re-runner for bundle kind {kind!r}")
    origin = bundle.meta.get("platform") or {}
    print(f"case    {bundle.meta.get('nodeid')}")
    print(f"failed  on {origin.get('device')}/{origin.get('arch')}: {bundle.meta.get('failure')}")
    verdict = rerun(bundle, args.path)
    print(verdict.text())
    return EXIT_OK if verdict.ok else EXIT_FAILED


# --------------------------------------------------------------------- selftest
# Modules the selftest's steps run (module -> the distribution to install): qharness[dev].
SELFTEST_TOOLS = {"ruff": "ruff", "mypy": "mypy", "yaml": "pyyaml", "hypothesis": "hypothesis"}


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
                *_xdist_workers(args.workers),
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


# ------------------------------------------------------------------------ parser
class _Parser(argparse.ArgumentParser):
    """An argument parser whose ``pass_through`` subcommands (run, selftest) hand every
    argument from the first one they do not know (or after ``--``) to pytest, unchanged:
    ``run -k fp8_per_tensor``, ``run -x``, ``run -q``, ``run -- -k x`` all work."""

    def __init__(self, *args: Any, pass_through: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # '--wor' is pytest's, not a '--workers'
        super().__init__(*args, **kwargs)
        self.pass_through = pass_through

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.pass_through:
            return super().parse_known_args(args, namespace)
        ours, theirs = self._split_pass_through(list(sys.argv[1:] if args is None else args))
        parsed, extra = super().parse_known_args(ours, namespace)
        assert parsed is not None  # argparse returns the namespace it filled
        parsed.pytest_args = [*extra, *theirs]
        return parsed, []

    def _split_pass_through(self, args: list[str]) -> tuple[list[str], list[str]]:
        """Our options (with their values) up to the first unknown argument or ``--``."""
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                return args[:i], args[i + 1 :]
            action = self._option_string_actions.get(token.split("=", 1)[0])
            if action is None:
                return args[:i], args[i:]
            takes_value = action.nargs != 0 and "=" not in token
            i += 2 if takes_value else 1
        return args, []


def _workers(value: str) -> str:
    """``--workers``: "auto" or a non-negative count (pytest-xdist's ``-n``)."""
    if value == "auto" or (value.isascii() and value.isdigit()):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is not 'auto' or a non-negative integer")


def program_name() -> str:
    """``qharness`` when started as the console script, else ``python -m harness``."""
    return "qharness" if Path(sys.argv[0]).name == "qharness" else "python -m harness"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=program_name(), description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

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
        type=_workers,
        help="pytest-xdist workers, 0 for none; auto: one per visible GPU (each pinned to its "
        "own) on a GPU runner, one per core on a CPU",
    )
    p.add_argument("--simulate", metavar="SIMULATOR:ARCH", help=SIMULATE_HELP)
    p.set_defaults(func=cmd_run, pytest_args=[])
    p.epilog = "Every other argument (or all after --) goes to pytest, e.g. -k fp8_per_tensor."

    p = sub.add_parser("platform", help="platform, probed capabilities, support matrix")
    p.add_argument("--json", action="store_true")
    p.add_argument("--simulate", metavar="SIMULATOR:ARCH", help=SIMULATE_HELP)
    p.set_defaults(func=cmd_platform)

    p = sub.add_parser("schemes", help="list quantization schemes")
    p.add_argument("names", nargs="*", help="only these schemes (unknown names are an error)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_schemes)

    p = sub.add_parser("golden", help="refresh or check the golden store")
    p.add_argument("action", choices=["refresh", "check"])
    p.add_argument("--only", help="glob over entry names, e.g. 'linear/fp8_*'")
    p.add_argument("--root", default=str(shipped_golden_root()), help="golden store directory")
    p.add_argument("--no-recompute", action="store_true", help="check: integrity only")
    p.set_defaults(func=cmd_golden)

    p = sub.add_parser("report", help="merge runs into one report; regressions vs history")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories or results files")
    p.add_argument("--results", help="results file (default reports/latest)")
    p.add_argument("--history", help="history directory (`history add`) for baselines and plots")
    p.add_argument("--baseline", help="an earlier run (directory or results file) to compare with")
    p.add_argument("--out", help="write the markdown report here instead of stdout")
    p.add_argument("--html", help="write the self-contained HTML page here")
    p.add_argument("--summary", help="write the short CI summary (Markdown) here")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 on regressions")
    p.add_argument(
        "--csp-safe",
        action="store_true",
        help="--html without inline styles or data: images (styles in NAME.css, plots in "
        "NAME-assets/), for servers with a strict Content-Security-Policy such as Jenkins",
    )
    p.add_argument(
        "--github-annotations",
        action="store_true",
        help="print regressions and new failures as GitHub Actions error annotations",
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("history", help="the history store of runs (Parquet, one run per part)")
    p.add_argument("action", choices=["add", "list"])
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories or results files")
    p.add_argument("--history", default="reports/history", help="history directory")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("repro", help="re-run a failing case from its repro bundle")
    p.add_argument("bundle", help="a repro/<test>.safetensors file from a run directory")
    p.add_argument("--path", help="run this path instead of the one that failed")
    p.set_defaults(func=cmd_repro)

    p = sub.add_parser("selftest", help="lint, type-check and run every test", pass_through=True)
    p.add_argument(
        "--workers", default="auto", type=_workers, help="pytest-xdist workers, 0 for none"
    )
    p.set_defaults(func=cmd_selftest, pytest_args=[])
    p.epilog = "Every other argument (or all after --) goes to the final pytest step."
    return parser


def _validate_environment(args: argparse.Namespace) -> None:
    """Environment values the command will use, checked before it starts anything."""
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


def main(argv: Sequence[str] | None = None) -> int:
    _tolerate_narrow_output_encodings()
    args = build_parser().parse_args(argv)
    try:
        _validate_environment(args)
        status: int = args.func(args)
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
