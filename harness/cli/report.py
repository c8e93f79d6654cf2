"""``report``: one or more runs merged into one report (Markdown, HTML, CI summary, GitHub
annotations), with regressions against a history or a baseline run."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from harness.cli.common import caller_path, default_reports_dir, output_path
from harness.errors import EXIT_FAILED, EXIT_OK, UsageError


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
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


def _report_inputs(args: argparse.Namespace) -> list[Path]:
    """The runs to report: RUN arguments, else --results, else reports/latest."""
    from harness.report.rundir import resolve_latest

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
    from harness.report.rundir import RESULTS_NAME

    return [r if r.is_dir() else r.parent for r in runs if r.is_dir() or r.name == RESULTS_NAME]


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report.html_page import render_html
    from harness.report.markdown import full_markdown, summary_markdown
    from harness.report.nightly import build_report
    from harness.report.outputs import Outputs
    from harness.report.render import render_report
    from harness.report.runs import open_history

    runs = _report_inputs(args)
    baseline = caller_path(args.baseline) if args.baseline else None
    out = output_path(args.out) if args.out else None
    html_out = output_path(args.html) if args.html else None
    summary_out = output_path(args.summary) if args.summary else None
    for path, what in ((out, "--out"), (html_out, "--html"), (summary_out, "--summary")):
        if path is not None:
            _refuse_results_target(path, what)
            _refuse_results_target(path.resolve(), what)
    outputs = Outputs(
        {"--out": out, "--html": html_out, "--summary": summary_out}, own_runs=_own_runs(runs)
    )
    if html_out is not None and args.csp_safe and outputs.is_stream("--html"):
        raise UsageError(
            f"--html {html_out}: --csp-safe writes files beside the page; name a regular file"
        )
    history = open_history(caller_path(args.history)) if args.history else None
    report = build_report(runs, history, baseline)
    legacy = len(runs) == 1 and not args.runs and history is None
    text = render_report(runs[0], baseline=baseline) if legacy else full_markdown(report)
    if out is not None:
        outputs.write("--out", text)
        print(f"report written to {out}")
    else:
        print(text)
    if html_out is not None and args.csp_safe:
        from harness.report.csp import write_csp_safe

        page = render_html(report, html_out)
        extra = write_csp_safe(page, html_out, lambda _, text: outputs.write("--html", text))
        print(f"html report written to {html_out} (CSP-safe; {len(extra)} asset file(s) beside it)")
    elif html_out is not None:
        outputs.write("--html", render_html(report, html_out))
        print(f"html report written to {html_out}")
    if summary_out is not None:
        link = os.path.relpath(html_out, summary_out.parent) if html_out else None
        outputs.write("--summary", summary_markdown(report, link))
        print(f"summary written to {summary_out}")
    if args.github_annotations:
        from harness.report.annotations import github_annotations

        for line in github_annotations(report):
            print(line)
    if report.regressions and args.fail_on_regression:
        print(f"{len(report.regressions)} regression(s)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
