"""``history add|list``: runs added to the Parquet history store that reports take their
baselines and plots from, and the runs it holds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.cli.common import caller_path
from harness.errors import EXIT_OK, UsageError


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("history", help="the history store of runs (Parquet, one run per part)")
    p.add_argument("action", choices=["add", "list"])
    p.add_argument("runs", nargs="*", metavar="RUN", help="run directories or results files")
    p.add_argument("--history", default="reports/history", help="history directory")
    p.set_defaults(func=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    from harness.report.reading.runs import add_runs, open_history

    history = open_history(caller_path(args.history))
    if args.action == "list":
        for run_id in history.run_ids():
            print(run_id)
        return EXIT_OK
    if not args.runs:
        raise UsageError("history add: name at least one run directory or results file")
    for outcome in add_runs(history, [caller_path(r) for r in args.runs]):
        detail = f": {outcome.detail}" if outcome.detail else ""
        stream = sys.stderr if outcome.status == "skipped" else sys.stdout
        print(f"{outcome.run}: {outcome.status}{detail}", file=stream)
    print(f"history {history.root}: {len(history.run_ids())} run(s)")
    return EXIT_OK
