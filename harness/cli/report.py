"""``report``: one or more runs merged into one report (Markdown, HTML, CI summary, GitHub
annotations), with regressions against a history or a baseline run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import caller_path, default_reports_dir, output_path
from harness.errors import EXIT_FAILED, EXIT_OK, UsageError
from harness.report.outputs.table import REPORT_OUTPUTS, Rendering


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("report", help="merge runs into one report; regressions vs history")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories or results files")
    p.add_argument("--results", help="results file (default reports/latest)")
    p.add_argument("--history", help="history directory (`history add`) for baselines and plots")
    p.add_argument("--baseline", help="an earlier run (directory or results file) to compare with")
    for output in REPORT_OUTPUTS:  # each output declares its option (outputs/table.py)
        if not output.flag:
            p.add_argument(output.option, help=output.help)
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 on regressions")
    p.add_argument(
        "--csp-safe",
        action="store_true",
        help="--html without inline styles or data: images (styles in NAME.css, plots in "
        "NAME-assets/), for servers with a strict Content-Security-Policy such as Jenkins",
    )
    for output in REPORT_OUTPUTS:
        if output.flag:
            p.add_argument(output.option, action="store_true", help=output.help)
    p.set_defaults(func=cmd_report)


def _report_inputs(args: argparse.Namespace) -> list[Path]:
    """The runs to report: RUN arguments, else --results, else reports/latest."""
    from harness.report.reading.rundir import resolve_latest

    if args.runs:
        return [caller_path(r) for r in args.runs]
    if args.results:
        return [caller_path(args.results)]
    reports = default_reports_dir()
    latest = resolve_latest(reports)
    if latest is not None and latest.results.is_file():
        return [latest.results]
    return [reports / "latest.json"]


def _refuse_results_target(path: Path, what: str) -> None:
    """Never overwrite a results file (or anything JSON) with a report."""
    if path.suffix.lower() == ".json" or path.name == "results.json":
        raise UsageError(f"{what} {path}: refusing to write a report over a JSON file")


def _own_runs(runs: list[Path]) -> list[Path]:
    """The run directories of the runs reported: their reports may be rewritten."""
    from harness.report.reading.rundir import RESULTS_NAME

    return [r if r.is_dir() else r.parent for r in runs if r.is_dir() or r.name == RESULTS_NAME]


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.model.nightly import build_report
    from harness.report.outputs.targets import Outputs
    from harness.report.reading.runs import open_history

    runs = _report_inputs(args)
    baseline = caller_path(args.baseline) if args.baseline else None
    paths = {
        o.option: output_path(getattr(args, o.dest)) if getattr(args, o.dest) else None
        for o in REPORT_OUTPUTS
        if not o.flag
    }
    for what, path in paths.items():
        if path is not None:
            _refuse_results_target(path, what)
            _refuse_results_target(path.resolve(), what)
    outputs = Outputs(paths, own_runs=_own_runs(runs))
    html_out = paths["--html"]
    if html_out is not None and args.csp_safe and outputs.is_stream("--html"):
        raise UsageError(
            f"--html {html_out}: --csp-safe writes files beside the page; name a regular file"
        )
    history = open_history(caller_path(args.history)) if args.history else None
    report = build_report(runs, history, baseline)
    legacy = len(runs) == 1 and not args.runs and history is None
    rendering = Rendering(report, runs, baseline, legacy, paths, outputs, args.csp_safe)
    for output in REPORT_OUTPUTS:  # in table order: what each writes, then what it prints
        asked = getattr(args, output.dest)
        if asked or output.always:
            path = paths.get(output.option) if asked else None
            for line in output.write(rendering, path):
                print(line)
    if report.regressions and args.fail_on_regression:
        print(f"{len(report.regressions)} regression(s)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
