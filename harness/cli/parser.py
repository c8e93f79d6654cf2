"""The argument parser: one subcommand per command module, in the order ``--help`` lists
them, and the parser class that lets ``run`` and ``selftest`` hand whatever they do not
know to pytest."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Whole-module imports: `from harness.cli import golden` would make this module depend on the
# package's __init__, which imports this module, a cycle tests/test_layering.py refuses.
import harness.cli.golden as golden
import harness.cli.history as history
import harness.cli.platform as platform
import harness.cli.report as report
import harness.cli.repro as repro
import harness.cli.run as run
import harness.cli.schemes as schemes
import harness.cli.selftest as selftest

# What --help says under the usage line: a description naming the program as it was started.
DESCRIPTION = "Numerical-correctness harness for quantized inference: {prog} <command> --help."

# Each module's add_parser(sub) declares its subcommand, its options and its handler.
COMMANDS = (run, platform, schemes, golden, report, history, repro, selftest)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose ``pass_through`` subcommands (run, selftest) take their own
    options wherever they stand and hand every other argument (and all after ``--``) to
    pytest, in order: ``run -k fp8_per_tensor``, ``run -k x --reports-dir r``, ``run -x``,
    ``run -- -k x`` all work. An option of ours given to pytest would be a pytest usage
    error after the run directory exists."""

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
        """Our options (with their values) anywhere before ``--``; the rest, in order, and
        everything after ``--``, is pytest's."""
        ours: list[str] = []
        theirs: list[str] = []
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                return ours, [*theirs, *args[i + 1 :]]
            action = self._option_string_actions.get(token.split("=", 1)[0])
            if action is None:
                theirs.append(token)
                i += 1
                continue
            takes_value = action.nargs != 0 and "=" not in token
            step = 2 if takes_value else 1
            ours.extend(args[i : i + step])
            i += step
        return ours, theirs


def program_name() -> str:
    """``qharness`` when started as the console script, else ``python -m harness``."""
    return "qharness" if Path(sys.argv[0]).name == "qharness" else "python -m harness"


def build_parser() -> argparse.ArgumentParser:
    prog = program_name()
    parser = _Parser(prog=prog, description=DESCRIPTION.format(prog=prog))
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser
