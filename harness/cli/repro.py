"""``repro``: a failing case re-run from the repro bundle its run wrote, on the path that
failed or another one."""

from __future__ import annotations

import argparse
from typing import Any

from harness.cli.common import caller_path
from harness.errors import EXIT_FAILED, EXIT_OK


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("repro", help="re-run a failing case from its repro bundle")
    p.add_argument("bundle", help="a repro/<test>.safetensors file from a run directory")
    p.add_argument("--path", help="run this path instead of the one that failed")
    p.set_defaults(func=cmd_repro)


def _rerunners() -> dict[str, Any]:
    """Bundle kind -> the function that re-runs it (kinds are written by `repro_case`)."""
    from harness.linear.repro import rerun_linear

    return {"linear": rerun_linear}


def cmd_repro(args: argparse.Namespace) -> int:
    from harness.report.model.escape import terminal_line
    from harness.store.repro import ReproError, read_bundle

    bundle = read_bundle(caller_path(args.bundle))
    kind = str(bundle.meta.get("kind"))
    rerun = _rerunners().get(kind)
    if rerun is None:
        raise ReproError(f"{args.bundle}: no re-runner for bundle kind {kind!r}")
    origin = bundle.meta.get("platform") or {}
    where = terminal_line(f"{origin.get('device')}/{origin.get('arch')}")
    print(f"case    {terminal_line(bundle.meta.get('nodeid'))}")
    print(f"failed  on {where}: {terminal_line(bundle.meta.get('failure'), 2000)}")
    try:
        verdict = rerun(bundle, args.path)
    except ReproError as exc:  # the re-runner's message names the tensor, not the file
        raise ReproError(f"{args.bundle}: {exc}") from None
    print(verdict.text())
    return EXIT_OK if verdict.ok else EXIT_FAILED
