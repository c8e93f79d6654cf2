"""Run every canary and its control through the suites; print who caught what.

Plugins are registered the way another package would: a throwaway ``*.dist-info`` with an
``entry_points.txt`` on PYTHONPATH of a pytest subprocess (as tests/paths/test_external_path.py
does), so nothing is visible outside this run. Canaries whose test ids carry their name
share a process (a few per process, two processes at a time); the others get their own.
Exit status 1 when a canary survives (no selected test failed) or a control fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from harness.platform.simulate import SIMULATE_VARIABLE
from tests.canaries.catalog import CANARIES, CONTROLS, GROUPS, Canary
from tests.canaries.mutants import ENV as MUTANT_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
PER_PROCESS = 6  # canaries sharing one pytest process


@dataclass
class Session:
    """One pytest process: the plugins it registers and the tests it selects."""

    label: str
    plugins: dict[str, tuple[str, str]]  # name -> (kind, target)
    expression: str
    files: tuple[str, ...]
    owner: str | None = None  # every record belongs to this plugin (isolated sessions)
    mutant: str | None = None
    simulate: str | None = None  # QHARNESS_SIMULATE for this process
    records: list[dict[str, object]] = field(default_factory=list)
    returncode: int = 0
    output: str = ""
    seconds: float = 0.0


def _join(expressions: Iterable[str]) -> str:
    return " or ".join(dict.fromkeys(expressions))


def _files(canaries: Iterable[Canary]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f for c in canaries for f in c.files))


def plan(canaries: tuple[Canary, ...]) -> list[Session]:
    sessions: list[Session] = []
    shared: dict[str, list[Canary]] = defaultdict(list)
    isolated_by_control: dict[str, list[Canary]] = defaultdict(list)
    for c in canaries:
        if c.isolated:
            isolated_by_control[c.control].append(c)
            kind = c.kind
            plugins = {} if kind == "mutant" else {c.name: (kind, c.target)}
            sessions.append(
                Session(
                    c.name,
                    plugins,
                    c.expression(),
                    c.files,
                    owner=c.name,
                    mutant=c.name if kind == "mutant" else None,
                    simulate=c.simulate,
                )
            )
        else:
            shared[c.control].append(c)
    for control, group in isolated_by_control.items():
        kind, target = CONTROLS[control]
        plugins = {} if kind == "mutant" else {control: (kind, target)}
        expression = _join(c.expression(control) for c in group)
        simulate = next((c.simulate for c in group if c.simulate), None)
        sessions.append(
            Session(control, plugins, expression, _files(group), owner=control, simulate=simulate)
        )
    for control, group in shared.items():
        for start in range(0, len(group), PER_PROCESS):
            chunk = group[start : start + PER_PROCESS]
            plugins = {c.name: (c.kind, c.target) for c in chunk}
            plugins[control] = CONTROLS[control]
            expression = _join(
                [*(c.expression() for c in chunk)] + [c.expression(control) for c in chunk]
            )
            label = f"{control} + {len(chunk)} canaries"
            sessions.append(Session(label, plugins, expression, _files(chunk)))
    return sessions


def _install(root: Path, plugins: dict[str, tuple[str, str]]) -> None:
    """A throwaway distribution whose entry points register ``plugins``."""
    dist = root / "qharness_canaries-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: qharness-canaries\nVersion: 0\n")
    by_group: dict[str, list[str]] = defaultdict(list)
    for name, (kind, target) in plugins.items():
        group = GROUPS[kind]
        if group is not None:
            by_group[group].append(f"{name} = {target}")
    text = "".join(f"[{g}]\n" + "\n".join(lines) + "\n\n" for g, lines in by_group.items())
    (dist / "entry_points.txt").write_text(text)


def run_session(session: Session) -> Session:
    with tempfile.TemporaryDirectory(prefix="qh-canary-") as tmp:
        root = Path(tmp)
        _install(root, session.plugins)
        results = root / "results.json"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(root), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
            ),
        }
        cmd = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
            *session.files, "-k", session.expression, f"--qharness-results={results}",
        ]  # fmt: skip
        if session.simulate is not None:
            env[SIMULATE_VARIABLE] = session.simulate
        if session.mutant is not None:
            env[MUTANT_ENV] = session.mutant
            cmd[3:3] = ["-p", "tests.canaries.mutants"]
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        session.seconds = time.monotonic() - started
        session.returncode = done.returncode
        session.output = done.stdout[-4000:] + done.stderr[-4000:]
        if results.exists():
            session.records = json.loads(results.read_text())["records"]
    return session


def _owner(record: dict[str, object], session: Session) -> str | None:
    if session.owner is not None:
        return session.owner
    nodeid = str(record["nodeid"])
    for name in session.plugins:
        if any(f"{a}{name}{b}" in nodeid for a in "-[" for b in "-]"):
            return name
    return None


def check_names(record: dict[str, object], plugin: str) -> list[str]:
    """Which checks failed: ``test:check`` for each named check the suite recorded as
    failed (``metrics.checks``), else the test and its assertion's first clause."""
    test = str(record["nodeid"]).split("::")[-1].split("[")[0]
    metrics = record.get("metrics")
    checks = metrics.get("checks") if isinstance(metrics, dict) else None
    if isinstance(checks, dict):
        named = [f"{test}:{c}" for c, v in checks.items() if str(v).startswith("fail")]
        if named:
            return named
    return [check_name(record, plugin, test)]


def check_name(record: dict[str, object], plugin: str, test: str) -> str:
    """The test function and the assertion's first clause (tests without named checks)."""
    reason = str(record.get("reason") or "").splitlines()[0] if record.get("reason") else ""
    reason = reason.removeprefix("AssertionError: ").removeprefix("Failed: ")
    reason = reason.replace(f"'{plugin}'", plugin).removeprefix(plugin).replace(plugin, "<plugin>")
    parts = [p.strip() for p in re.split(r"[:;(]", reason.strip(" :"))]
    # a leading name (a path, a shard, "fp8 vs <plugin>") is not the check: skip it
    while len(parts) > 1 and (" " not in parts[0] or "<plugin>" in parts[0]):
        parts = parts[1:]
    clause = parts[0]
    clause = re.sub(r"\d+(\.\d+)?", "N", clause).strip()[:60]
    return f"{test}: {clause}" if clause else test


@dataclass
class Outcome:
    name: str
    ran: int = 0
    skipped: int = 0
    failed: list[dict[str, object]] = field(default_factory=list)

    @property
    def checks(self) -> list[str]:
        return list(dict.fromkeys(c for r in self.failed for c in check_names(r, self.name)))


def collect(sessions: list[Session]) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    for s in sessions:
        for record in s.records:
            owner = _owner(record, s)
            if owner is None:
                continue
            o = outcomes.setdefault(owner, Outcome(owner))
            if record["outcome"] == "skipped":
                o.skipped += 1
                continue
            o.ran += 1
            if record["outcome"] in ("failed", "error"):
                o.failed.append(record)
    return outcomes


def _grouped(checks: list[str]) -> str:
    """``test:a; test:b; other:c`` -> ``test: a, b; other: c``."""
    by_test: dict[str, list[str]] = defaultdict(list)
    for c in checks:
        test, _, check = c.partition(":")
        by_test[test].append(check.strip())
    return "; ".join(
        f"{t}: {', '.join(c for c in cs if c)}".rstrip(": ") for t, cs in by_test.items()
    )


def report(
    canaries: tuple[Canary, ...], outcomes: dict[str, Outcome]
) -> tuple[list[str], list[str]]:
    survivors: list[str] = []
    print(f"\n{'canary':30} {'bug class':44} {'ran':>4} {'caught':>6}  caught by")
    for c in canaries:
        o = outcomes.get(c.name, Outcome(c.name))
        checks = o.checks
        if not o.failed:
            survivors.append(c.name)
        shown = _grouped(checks)
        print(f"{c.name:30} {c.bug[:44]:44} {o.ran:4d} {len(o.failed):6d}  {shown or 'SURVIVED'}")
    bad_controls: list[str] = []
    for control in dict.fromkeys(c.control for c in canaries):
        o = outcomes.get(control, Outcome(control))
        status = "ok" if not o.failed and o.ran else "FAILED" if o.failed else "RAN NOTHING"
        print(f"{control:30} {'(correct plugin)':44} {o.ran:4d} {len(o.failed):6d}  {status}")
        if status != "ok":
            bad_controls.append(control)
            for record in o.failed[:5]:
                print(f"    {record['nodeid']}: {str(record.get('reason'))[:200]}")
    return survivors, bad_controls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.canaries", description=__doc__)
    parser.add_argument("--only", nargs="*", help="canary names (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="pytest processes at a time")
    parser.add_argument("--json", help="write the table as JSON to this file")
    args = parser.parse_args(argv)
    canaries = CANARIES
    if args.only:
        unknown = set(args.only) - {c.name for c in CANARIES}
        if unknown:
            parser.error(f"unknown canaries {sorted(unknown)}")
        canaries = tuple(c for c in CANARIES if c.name in args.only)
    sessions = plan(canaries)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        sessions = list(pool.map(run_session, sessions))
    elapsed = time.monotonic() - started
    broken = [s for s in sessions if s.returncode not in (0, 1) or not s.records]
    for s in sessions:
        print(f"  {s.seconds:6.1f}s  exit {s.returncode}  {len(s.records):4d} tests  {s.label}")
    outcomes = collect(sessions)
    survivors, bad_controls = report(canaries, outcomes)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    c.name: {
                        "bug": c.bug,
                        "ran": outcomes.get(c.name, Outcome(c.name)).ran,
                        "caught_by": outcomes.get(c.name, Outcome(c.name)).checks,
                        "failed": [
                            str(r["nodeid"]) for r in outcomes.get(c.name, Outcome(c.name)).failed
                        ],
                    }
                    for c in canaries
                },
                indent=1,
            )
        )
    print(f"\ncanaries: {len(canaries)} in {len(sessions)} pytest processes, {elapsed:.0f}s")
    for s in broken:
        print(f"pytest did not run as asked for {s.label} (exit {s.returncode}):\n{s.output}")
    if survivors:
        print(f"SURVIVORS (no selected test failed): {', '.join(survivors)}")
    if bad_controls:
        print(f"CONTROLS FAILED (a correct plugin must pass): {', '.join(bad_controls)}")
    return 1 if survivors or bad_controls or broken else 0
