"""The records of one run as the text report tabulates them, folded record by record.

The text report (`report --results`, and what `run` prints) groups tests by their names as
it prints them: `md_inline` of the suite, scheme and path (``other`` and ``-`` where none),
so two names that read alike (whitespace folded, cut at the same length) are one row, as
they always were. Its tables are small (one entry per group; the SQNR of the linear and
MoE tests is kept per group until the run is read, for the median); the digest
(`harness.report.model.digest`) holds them, and no record is kept.

A metric every record holds as a JSON integer stays an integer (the worst SQNR, the largest
peak), as a table of the records would keep it; otherwise it is a float.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.report.model.escape import md_inline

SQNR_SUITES = ("linear", "moe")  # the suites whose SQNR the text report shows per group

Group = tuple[str, str]  # (scheme, path) as printed


def label(value: Any, missing: str) -> str:
    """A name as the text report prints it (null or empty: ``missing``)."""
    return md_inline(value or missing)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class SqnrGroup:
    """One (scheme, path) group's SQNR: its median and its worst (lowest) value."""

    median: float
    worst: int | float


@dataclass
class RecordTables:
    """The text report's tables of one run's records (module doc)."""

    records: int = 0
    outcomes: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # suite, path, outcome
    executions: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # ..., execution
    sqnr: dict[str, dict[Group, SqnrGroup]] = field(default_factory=dict)  # suite -> groups
    sqnr_ints: bool = True  # every record's SQNR a JSON integer
    peaks: dict[Group, int | float] = field(default_factory=dict)  # largest per group
    peak_ints: bool = True  # every record's peak a JSON integer
    _values: dict[str, dict[Group, list[int | float]]] = field(default_factory=dict, repr=False)
    _names: dict[tuple[Any, str], str] = field(default_factory=dict, repr=False)

    def _label(self, value: Any, missing: str) -> str:
        found = self._names.get((value, missing))
        if found is None:  # names repeat: each distinct one is escaped once
            found = self._names[(value, missing)] = label(value, missing)
        return found

    def record(self, r: dict[str, Any]) -> None:
        """Fold one (validated) record."""
        metrics = r.get("metrics") or {}
        self.records += 1
        suite = self._label(r.get("suite"), "other")
        group = (self._label(r.get("scheme"), "-"), self._label(r.get("path"), "-"))
        self.outcomes[(suite, group[1], r["outcome"])] += 1
        if r.get("execution") is not None:
            self.executions[(suite, group[1], r["execution"])] += 1
        sqnr, peak = metrics.get("sqnr_db"), metrics.get("peak_bytes")
        self.sqnr_ints = self.sqnr_ints and _is_int(sqnr)
        self.peak_ints = self.peak_ints and _is_int(peak)
        if suite in SQNR_SUITES and sqnr is not None and not math.isnan(sqnr):
            self._values.setdefault(suite, {}).setdefault(group, []).append(sqnr)
        if peak is not None:  # a count: never NaN (validation)
            self.peaks[group] = max(self.peaks.get(group, peak), peak)

    def finish(self) -> RecordTables:
        """Every group's SQNR median and worst; the values are dropped."""
        for suite, groups in self._values.items():
            self.sqnr[suite] = {
                g: SqnrGroup(statistics.median(float(v) for v in values), min(values))
                for g, values in groups.items()
            }
        self._values.clear()
        self._names.clear()
        return self
