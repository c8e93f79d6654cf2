"""The types of the plugin's fixtures, for the suites' signatures (no ``Any``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.core.checks import CheckResult
    from harness.memory.tracker import PeakMeasurement


class RecordResult(Protocol):
    """``record_result(name=value, ...)``: metrics for this test's result record."""

    def __call__(self, **values: Any) -> None: ...


class RecordChecks(Protocol):
    """The ``record_checks`` fixture's signature."""

    def __call__(self, checks: Iterable[CheckResult], known_finding: str | None = None) -> None: ...


class ReproCase(Protocol):
    """``repro_case(kind, tensor=..., ...)``: tensors kept for a repro bundle."""

    def __call__(self, kind: str, **tensors: Any) -> None: ...


MeasureMemory = Callable[[], AbstractContextManager["PeakMeasurement"]]
