"""One type for a suite's case: its test id, results-record fields, finding case and golden
entry come from fields the case declares, never from strings a suite builds by hand.

A case class is a frozen dataclass that also inherits `Case` and declares, as class
variables, what each of the four is made of:

- ``SUITE``: the record's ``suite`` field.
- ``ID``: attribute names whose values, rendered by `id_part`, joined by ``-`` (empty parts
  dropped), are the test id. Ids are a contract users script against: a case's id must
  not change when its class is refactored (tests/paths/test_case.py holds every suite's).
- ``RECORD``: the record's other fields, each an attribute name or ``"key=attribute"``;
  values are rendered by `record_value` (a shape tuple becomes ``MxNxK``).
- ``FINDING_SUITE``: the suite whose engine findings the case is matched against ("" for
  none); `finding_fields` adds the rest of its `FindingCase` (scheme, problem and the named
  case by default).
- ``GOLDEN``: a ``str.format`` template over the case's attributes naming its golden entry
  ("" for a case with none).
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.paths.findings import FindingCase


def id_part(name: str, value: Any) -> str:
    """One attribute's part of a test id: a shape as ``MxNxK``, a flag as its name or
    ``no<name>``, anything else as text."""
    if isinstance(value, bool):
        return name if value else f"no{name}"
    if isinstance(value, tuple):
        return "x".join(str(v) for v in value)
    return str(value)


def record_value(value: Any) -> Any:
    """One attribute's value in the results record: a shape tuple as ``MxNxK``."""
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)
    return value


class Case:
    """Mixin for a suite's case (see the module doc for the class variables it reads)."""

    SUITE: ClassVar[str]
    ID: ClassVar[tuple[str, ...]]
    RECORD: ClassVar[tuple[str, ...]] = ()
    FINDING_SUITE: ClassVar[str] = ""
    GOLDEN: ClassVar[str] = ""

    @property
    def id(self) -> str:
        parts = (id_part(name, getattr(self, name)) for name in self.ID)
        return "-".join(p for p in parts if p)

    def record_fields(self) -> dict[str, Any]:
        """Fields copied into the results file for this test."""
        fields: dict[str, Any] = {"suite": self.SUITE}
        for item in self.RECORD:
            key, _, attr = item.partition("=")
            fields[key] = record_value(getattr(self, attr or key))
        return fields

    def finding_fields(self) -> dict[str, Any]:
        """The `FindingCase` fields besides its suite: scheme, problem and named case where
        the case has them (and the test id); a case matched on other fields overrides this."""
        names = ("scheme", "problem", "finding_case_name")
        found = {name: getattr(self, name) for name in names if hasattr(self, name)}
        if "finding_case_name" in found:
            found["case"] = found.pop("finding_case_name")
        return found

    def finding_case(self, **known_at_run_time: Any) -> FindingCase:
        """The fields an engine's known findings are matched against; a field only known
        when the test runs (a problem sized by the loaded tensors) is passed in."""
        if not self.FINDING_SUITE:
            raise TypeError(f"{type(self).__name__} cases are matched against no findings")
        fields = {"id": self.id, **self.finding_fields(), **known_at_run_time}
        return FindingCase(self.FINDING_SUITE, **fields)

    @property
    def golden_entry(self) -> str:
        """The golden entry this case's tensors come from."""
        if not self.GOLDEN:
            raise TypeError(f"{type(self).__name__} cases have no golden entry")
        return self.GOLDEN.format_map({k: getattr(self, k) for k in _fields_of(self.GOLDEN)})


def _fields_of(template: str) -> list[str]:
    import string

    return [name for _, name, _, _ in string.Formatter().parse(template) if name]
