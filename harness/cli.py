"""``python -m harness run|platform|schemes|golden|report|selftest``.

These names, their options and their JSON outputs are a contract users script against;
docs/CLI.md documents them. Errors are one line on stderr and exit status 2 (bad input) or
1 (a check that failed); never a traceback for a user mistake.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, QHarnessError, UsageError

REPO_ROOT = Path(__file__).resolve().parent.parent
__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "UsageError", "main"]


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True))


# --------------------------------------------------------------------- platform
def platform_report() -> dict[str, Any]:
    """Platform, probed capabilities vs expectations, and the native support matrix."""
    from harness.linear.matrix import support_matrix
    from harness.moe.dispatch_report import moe_dispatch_report
    from harness.platform.capabilities import capabilities, expected
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
        "support": support_matrix(info),
        "moe_dispatch": moe_dispatch_report(info),
    }


def cmd_platform(args: argparse.Namespace) -> int:
    report = platform_report()
    if args.json:
        _print_json(report)
        return EXIT_OK
    p = report["platform"]
    print(f"device       {p['device']}  (is_cuda_alike={p['is_cuda_alike']})")
    print(f"arch         {p['arch']}  {p['name']}")
    print(f"torch        {p['torch_version']}  cuda={p['cuda_version']}  hip={p['hip_version']}")
    print(f"fp8 dtype    {p['fp8_dtype']}")
    print("\ncapabilities (probed by running tiny ops)")
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
        act = (
            "unquantized"
            if a is None
            else (f"{a.format} {a.granularity} {'dynamic' if a.dynamic else 'static'}")
        )
        print(
            f"{s.name:<{width}}  W {w.format} {w.granularity} "
            f"scale {w.scale_format}/{w.scale_rounding} | A {act} | SQNR >= {s.sqnr_floor_db} dB"
        )
    return EXIT_OK


# ----------------------------------------------------------------------- golden
def cmd_golden(args: argparse.Namespace) -> int:
    from harness.catalog import golden_builders
    from harness.store.golden import GoldenError, GoldenStore

    store = GoldenStore(args.root, entry_builders=golden_builders())
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


def cmd_run(args: argparse.Namespace) -> int:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else REPO_ROOT / "reports" / f"results-{stamp}.json"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO_ROOT / "suites"),
        f"--rootdir={REPO_ROOT}",
        f"--qharness-results={out}",
        "-q",
        *_xdist_workers(args.workers),
        *args.pytest_args,
    ]
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.call(cmd, cwd=REPO_ROOT)
    if out.exists():
        latest = out.parent / "latest.json"
        shutil.copyfile(out, latest)
        from harness.report.render import render_report

        print(render_report(out, baseline=None, max_rows=40))
    if status == 5:
        print("no tests ran: treating as a failure", file=sys.stderr)
        return EXIT_FAILED
    return status


# ----------------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.render import regressions, render_report
    from harness.report.results import ResultsError

    results = Path(args.results) if args.results else REPO_ROOT / "reports" / "latest.json"
    try:
        text = render_report(results, baseline=args.baseline)
        found = regressions(results, args.baseline) if args.baseline else []
    except ResultsError as exc:
        raise UsageError(str(exc)) from exc
    if args.out:
        Path(args.out).write_text(text)
        print(f"report written to {args.out}")
    else:
        print(text)
    return EXIT_FAILED if found and args.fail_on_regression else EXIT_OK


# --------------------------------------------------------------------- selftest
def cmd_selftest(args: argparse.Namespace) -> int:
    """Lint, type-check, golden integrity, then self-tests and suites; first failure stops it."""
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
    ]
    for label, cmd in steps:
        print(f"== {label}: {' '.join(cmd[1:])}", flush=True)
        status = subprocess.call(cmd, cwd=REPO_ROOT)
        if status == 5:
            print(f"{label}: no tests ran, which counts as a failure", file=sys.stderr)
            return EXIT_FAILED
        if status != 0:
            print(f"{label} failed (exit {status})", file=sys.stderr)
            return status
    return EXIT_OK


# ------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run all suites on this platform, write a results file")
    p.add_argument("--out", help="results file (default reports/results-<UTC>.json)")
    p.add_argument("--workers", default="auto", help="pytest-xdist workers, 0 for none")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("platform", help="platform, probed capabilities, support matrix")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_platform)

    p = sub.add_parser("schemes", help="list quantization schemes")
    p.add_argument("names", nargs="*", help="only these schemes (unknown names are an error)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_schemes)

    p = sub.add_parser("golden", help="refresh or check the golden store")
    p.add_argument("action", choices=["refresh", "check"])
    p.add_argument("--only", help="glob over entry names, e.g. 'linear/fp8_*'")
    p.add_argument("--root", default=str(REPO_ROOT / "golden"), help="golden store directory")
    p.add_argument("--no-recompute", action="store_true", help="check: integrity only")
    p.set_defaults(func=cmd_golden)

    p = sub.add_parser("report", help="summarize a results file, compare with a baseline")
    p.add_argument("--results", help="results file (default reports/latest.json)")
    p.add_argument("--baseline", help="an earlier results file to compare against")
    p.add_argument("--out", help="write the markdown report here instead of stdout")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 on regressions")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("selftest", help="lint, type-check and run every test")
    p.add_argument("--workers", default="auto", help="pytest-xdist workers, 0 for none")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments")
    p.set_defaults(func=cmd_selftest)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status: int = args.func(args)
    except QHarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return status
