"""``python -m harness run|platform|schemes|golden|report|selftest``.

These names, their options and their JSON outputs are a contract users script against;
docs/CLI.md documents them. Exit status: 0 ok, 1 a check or test failed (or a regression was
flagged), 2 bad input, 3 an unexpected internal error, 4 the file system refused a read or
write, 130 interrupted, 141 stdout's reader left (no message). Errors are one line on
stderr; never a traceback (set QHARNESS_TRACEBACK=1 to see one for an internal error).

One module per command (its options and what it does), beside the parts they share:
``entry`` (``main``: errors become one line and an exit status), ``parser`` (the argument
parser that takes our options anywhere and hands the rest to pytest), ``common`` (helpers
of several commands) and ``pytest_child`` (pytest as a child process, its exit statuses as
ours). This package only re-exports the names scripts and tests import from
``harness.cli`` (``main``, ``build_parser``, ``finish_run``, ``exit_for_pytest``, the
``EXIT_*`` codes, ...).
``python -m harness <command>`` and the ``qharness`` script start ``harness.cli.main``; each
command is one module that declares its subcommand (options, help, handler: ``add_parser``)
and does its job; the parser lists them, and no command imports another command's module.

Modules, each with its one job:

- ``entry``: `main`: parse, check the environment the command will use (`QHARNESS_GPUS`,
  `QHARNESS_RUNNER`, `QHARNESS_SIMULATE`), run it, and turn every error into one line and an
  exit status: a `QHarnessError` its own, a plugin's exception named with its entry point, a
  file-system refusal 4, a bug 3 (traceback behind `QHARNESS_TRACEBACK=1`), Ctrl-C 130.
- ``parser``: The argument parser: the command modules in `--help` order, and the parser
  class whose `run` and `selftest` take their own options wherever they stand and hand every
  other argument (and all after `--`) to pytest.
- ``common``: What several commands share: JSON output, paths relative to the caller, the
  default reports directory, `--simulate`, the `--workers` value.
- ``pytest_child``: pytest as a child process: `-n` for `--workers`, `run_pytest` (SIGTERM
  forwarded to the child, also one that arrives while it starts; Ctrl-C waited out),
  pytest's exit statuses mapped onto the CLI's.
- ``run``, ``pytest_args``, ``run_reports``: `run`: plugins loaded and `-k` checked before a
  run directory exists, the suites as a pytest child, `--bench`, a directory discarded when
  interrupted before any record; the arguments passed to pytest and their `-k`; summary.md,
  report.html, `latest` and `--out` once results exist, and the few lines a run ends with.
- ``platform``, ``schemes``, ``golden``, ``report``, ``history``, ``repro``, ``selftest``:
  One command each: the platform and its probes and dispatch tables; the schemes; golden
  refresh and check (recomputed in a child with torch's CPU kernels pinned to AVX2, since
  its ISA builds differ in last bits of seeded inputs); the merged report; the history
  store; a repro bundle re-run; the project's own gate (lint, types, golden, benchmarks,
  tests, canaries).
"""

from __future__ import annotations

from harness.cli.common import SIMULATE_HELP as SIMULATE_HELP
from harness.cli.common import apply_simulation as apply_simulation
from harness.cli.common import default_reports_dir as default_reports_dir
from harness.cli.entry import TRACEBACK_VARIABLE as TRACEBACK_VARIABLE
from harness.cli.entry import main as main
from harness.cli.golden import cmd_golden as cmd_golden
from harness.cli.history import cmd_history as cmd_history
from harness.cli.parser import build_parser as build_parser
from harness.cli.parser import program_name as program_name
from harness.cli.platform import cmd_platform as cmd_platform
from harness.cli.platform import platform_report as platform_report
from harness.cli.pytest_child import CONCISE_PYTEST as CONCISE_PYTEST
from harness.cli.pytest_child import INHERITED_PYTEST_VARIABLES as INHERITED_PYTEST_VARIABLES
from harness.cli.pytest_child import PYTEST_INTERRUPTED as PYTEST_INTERRUPTED
from harness.cli.pytest_child import exit_for_pytest as exit_for_pytest
from harness.cli.report import cmd_report as cmd_report
from harness.cli.repro import cmd_repro as cmd_repro
from harness.cli.run import cmd_run as cmd_run
from harness.cli.run import worker_plan as worker_plan
from harness.cli.run_reports import finish_run as finish_run
from harness.cli.run_reports import run_digest as run_digest
from harness.cli.run_reports import write_run_reports as write_run_reports
from harness.cli.schemes import cmd_schemes as cmd_schemes
from harness.cli.selftest import REPO_ROOT as REPO_ROOT
from harness.cli.selftest import SELFTEST_TOOLS as SELFTEST_TOOLS
from harness.cli.selftest import cmd_selftest as cmd_selftest
from harness.cli.selftest import selftest_prerequisites as selftest_prerequisites
from harness.errors import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)

# The public names of the one-module CLI this package replaced stay importable from it (the
# `as` form marks each a re-export); __all__ is what it always was.
__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "main",
]
