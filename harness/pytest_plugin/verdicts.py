"""Verdict policy: a case's named checks and known engine findings -> pass, fail or xfail.

Every check is evaluated and recorded; a case fails naming every failed check, unless it
reproduces a documented engine finding (`harness.paths.findings`), which makes it an
xfail carrying the finding's text, counted and reported. A case that matches a finding and
passes passes (findings can depend on the data).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NoReturn

import pytest

from harness.pytest_plugin.fixture_types import RecordChecks, RecordResult

if TYPE_CHECKING:
    from harness.core.checks import CheckResult


def xfail_known(record_result: RecordResult, finding: str, detail: str) -> NoReturn:
    """End the case as an xfail for a documented engine finding it reproduces
    (`harness.paths.findings.known_finding`): the finding is recorded on the case, so the
    report counts and lists it, and ``detail`` says what happened this time."""
    record_result(known_finding=finding)
    pytest.xfail(f"known finding: {finding} | {detail}")


def checks_recorder(record_result: RecordResult) -> RecordChecks:
    """The ``record_checks`` fixture's function for one test (see `harness.plugin`)."""
    from harness.core.checks import failure_summary, verdicts

    seen: dict[str, str] = {}

    def record(checks: Iterable[CheckResult], known_finding: str | None = None) -> None:
        results = list(checks)
        for result in results:
            record_result(**result.metrics)
        seen.update(verdicts(results))
        record_result(checks=dict(seen))
        summary = failure_summary(results)
        if summary is not None and known_finding is not None:
            xfail_known(record_result, known_finding, summary)
        if summary is not None:
            pytest.fail(summary, pytrace=False)

    return record
