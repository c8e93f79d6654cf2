"""Recording: one record per test (case fields, outcome, skip reason, metrics), merged
across pytest-xdist workers on the controller, written as the results file; repro bundles
of failing cases; the skip summary. Registered only while qharness is active."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import filesystem_fault
from harness.pytest_plugin.execution import ran
from harness.report.reading.schema import FIELDS

RECORD_KEY = "qharness"
CASE_KEY = "qharness_case"
REPRO_KEY = pytest.StashKey[dict[str, Any]]()
# Case fields a test may give through record_result(...) when it has no case parameter: they
# go to the record's top level (the matrix reads them there), not only into its metrics.
CASE_FIELDS = tuple(f.name for f in FIELDS if f.group == "case")  # harness.report.reading.schema


def stop_gracefully_on_signals(session: pytest.Session) -> None:
    """SIGTERM (a CI job cancelled) or Ctrl-C: let the running test finish, then end the
    session, so every finished test is recorded and the results file is written, marked
    partial. A second signal interrupts at once (a hung test), as Ctrl-C always did."""
    import signal
    import threading

    from harness.process import stop_session

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: Any) -> None:
        if session.shouldstop:
            raise KeyboardInterrupt(f"signal {signum}")
        stop_session(session, f"signal {signum}: stopping after the running test")

    for signum in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, stop)


def write_repro_bundle(item: pytest.Item, report: pytest.TestReport) -> None:
    """On a failed call, write the kept tensors of ``item`` as a bundle (if asked for)."""
    directory = item.config.getoption("--qharness-repro")
    kept = item.stash.get(REPRO_KEY, None)
    if not directory or not kept or not report.failed or report.when != "call":
        return
    import torch

    from harness.platform.info import detect
    from harness.store.repro import Bundle, write_bundle

    props = dict(item.user_properties)
    meta = {
        "kind": kept["kind"],
        "case": props.get(CASE_KEY, {}),
        "metrics": props.get(RECORD_KEY, {}),
        "failure": _failure_message(report),
        "platform": detect().to_json(),
        "versions": {"torch": torch.__version__},
    }
    write_bundle(Path(directory), item.nodeid, Bundle(kept["tensors"], meta))


class JsonDict(dict[str, Any]):
    """A record's properties whose text form is JSON: JUnit XML writes ``str(value)`` of
    each user property, which for a plain dict is a Python repr no tool can read."""

    def __str__(self) -> str:
        import json

        return json.dumps(self, sort_keys=True, default=str)


class JsonProperties:
    """Registered on the controller only (an xdist worker must ship plain dicts): before
    JUnit XML reads them, this test's qharness properties become `JsonDict`s."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        report.user_properties = [
            (name, JsonDict(value) if name in (RECORD_KEY, CASE_KEY) and isinstance(value, dict)
             else value)
            for name, value in report.user_properties
        ]  # fmt: skip


class ActiveHooks:
    """Hooks registered only when qharness is active: case fields and the header."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Attach the case's fields (if its parameter provides them) to every report."""
        callspec = getattr(item, "callspec", None)
        fields: dict[str, Any] = {}
        if callspec is not None:
            for value in callspec.params.values():
                describe = getattr(value, "record_fields", None)
                if callable(describe):
                    fields.update(describe())
        from harness.platform.info import detect
        from harness.pytest_plugin.execution import case_execution

        execution = case_execution(fields, detect())  # on a simulated platform only
        if execution is not None:
            fields["execution"] = execution
        item.user_properties.append((CASE_KEY, fields))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        write_repro_bundle(item, report)
        return report

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from harness.platform.info import detect

        info = detect()
        simulated = f", SIMULATED: {info.simulated}" if info.simulated else ""
        return [
            f"qharness: platform {info.device}/{info.arch} ({info.name}{simulated}), "
            f"torch {info.torch_version}"
        ]


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _failure_message(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return str(message if message is not None else report.longrepr).strip()[:2000]


class ResultRecorder:
    """Collects one record per test on the controller and writes the results file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        existing = self.records.get(report.nodeid)
        if report.when == "teardown":
            if report.failed and existing is not None:
                existing["outcome"] = "error"
                existing["reason"] = _failure_message(report)
            return
        if report.when == "setup" and report.passed:
            return
        outcome: str
        if report.when == "call":
            expected_failure = hasattr(report, "wasxfail")
            if expected_failure and report.skipped:
                outcome = "xfailed"
            elif expected_failure and report.passed:
                outcome = "xpassed"  # non-strict xfail that passed; strict ones are failures
            else:
                outcome = report.outcome
        else:
            outcome = "skipped" if report.skipped else "error"
        props: dict[str, Any] = dict(report.user_properties)
        reason = None
        if outcome == "skipped":
            reason = _skip_reason(report)
        elif outcome in ("failed", "error"):
            reason = _failure_message(report)
        metrics = props.get(RECORD_KEY, {})
        case = dict(props.get(CASE_KEY, {}))
        for name in CASE_FIELDS:  # record_result(scheme=..., path=...) reaches the matrix
            if case.get(name) is None and isinstance(metrics.get(name), str):
                case[name] = metrics[name]
        if case.get("execution") is not None:  # a skipped test ran nothing
            case["execution"] = ran(case["execution"], outcome)
        self.records[report.nodeid] = {
            "nodeid": report.nodeid,
            **case,
            "outcome": outcome,
            "reason": reason,
            "duration_s": round(report.duration, 6),
            "metrics": metrics,
        }

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped at collection (``pytest.skip(allow_module_level=True)``,
        ``importorskip``) or broken there has no test reports: record it once, under the
        module's node id, so the skip is counted with its reason and the error is seen.
        Under xdist the controller gets each such report (deduplicated) from the workers."""
        if report.passed or report.nodeid in self.records:
            return
        skipped = bool(report.skipped)
        self.records[report.nodeid] = {
            "nodeid": report.nodeid,
            "outcome": "skipped" if skipped else "error",
            "reason": _skip_reason(report) if skipped else _failure_message(report),
            "duration_s": 0.0,
            "metrics": {},
        }

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        stop_gracefully_on_signals(session)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(
        self, session: pytest.Session, exitstatus: int
    ) -> Generator[None, object, object]:
        """The results first (rescued, when the run directory refuses them), then pytest's
        own session files (junit.xml): a run directory that turned read-only during the run
        is one line naming the file pytest could not write, never its traceback."""
        path = self.config.getoption("--qharness-results")
        if path is not None:
            from harness.report.reading.results import write_results

            write_results(Path(path), list(self.records.values()), exitstatus=int(exitstatus))
        try:
            return (yield)
        except OSError as exc:
            fault = filesystem_fault(exc)
            if fault is None:
                raise
            print(f"qharness: {fault}; pytest could not write it", file=sys.stderr)
            return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        skipped = Counter(r["reason"] for r in self.records.values() if r["outcome"] == "skipped")
        if skipped:
            from harness.report.model.escape import terminal_line

            terminalreporter.section("qharness: skips by reason")
            for reason, count in skipped.most_common():
                terminalreporter.write_line(f"{count:5d}  {terminal_line(reason, 2000)}")
        path = self.config.getoption("--qharness-results")
        if path:
            terminalreporter.write_line(f"qharness results: {path}")
