"""Known engine findings, declared by scheme and case fields rather than by test-id text.

An engine adapter (a path or a quantizer) lists the documented findings its engine
reproduces (docs/ENGINE-FINDINGS.md) as `KnownFinding` values in ``known_findings``. Each
suite describes the case it runs as a `FindingCase` (its suite, scheme, linear problem,
quantizer spec fields, named case) and asks `known_finding` which finding, if any, covers
it; a case that matches and fails is recorded as an xfail with the finding's text, one
that matches and passes passes (findings can depend on the data). Matching reads the
case's fields, never how its test id is spelled, so a suite may change its ids without
breaking an adapter.

A finding may also say exactly what the engine does: ``behaves_as`` names the rules
(registered in `harness.core.conventions`, where a convention and a finding's model share one
vocabulary) that turn the reference into the engine's observed behaviour. Such a finding is
**scoped**: a suite xfails a case only where every difference from the reference is one the
finding's rules reproduce, so a second fault in the same function (another tile wrong,
another rounding) still fails the case instead of hiding under the known one. A finding
without ``behaves_as`` covers its whole case (its differences depend on more than a rule).

The older form, a ``dict[str, str]`` of fnmatch patterns over test ids -> text, is still
accepted from third-party plugins and matched against `FindingCase.id`; it is deprecated,
because it ties the adapter to the id format of every suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatch

import torch

from harness.core.conventions import get_convention
from harness.paths.base import LinearProblem

# The suites that ask for findings; a finding may be limited to some of them.
SUITES: frozenset[str] = frozenset(
    {"linear", "loading", "special_values", "float32_activations", "quantizers", "moe_routing"}
)


@dataclass(frozen=True)
class FindingCase:
    """What a finding may be declared on: the fields of one suite case.

    Fields a suite has no value for stay at their defaults (a quantizer case has no
    linear problem; a linear case has no scale mode of its own).
    """

    suite: str  # one of SUITES
    scheme: str = ""  # the scheme name ("" for cases that have none, e.g. MX edge blocks)
    problem: LinearProblem | None = None  # linear, loading and special-value cases
    case: str = ""  # the suite's named case: loading case, special value, quantizer role
    element_format: str = ""  # quantizer cases: the spec's element format
    scale_mode: str = ""  # quantizer cases: the spec's scale rounding ("floor", "rceil", ...)
    flavour: str = ""  # loading cases: the platform FP8 flavour loaded into
    id: str = ""  # the test id; read only by the deprecated pattern form
    shape: tuple[int, ...] = ()  # quantizer cases on one tensor: the quantized tensor's shape

    @property
    def out_dtype(self) -> torch.dtype | None:
        return None if self.problem is None else self.problem.out_dtype


CasePredicate = Callable[[FindingCase], bool]


@dataclass(frozen=True)
class KnownFinding:
    """A documented engine finding and the cases that may reproduce it.

    Every field left ``None`` matches any case; the others must all hold. ``when`` is any
    further condition on the case's fields (a shape property such as ``K % 32 != 0``).
    """

    text: str  # the finding's write-up, recorded with each case that reproduces it
    schemes: frozenset[str] | None = None
    suites: frozenset[str] | None = None
    out_dtypes: frozenset[torch.dtype] | None = None
    cases: frozenset[str] | None = None  # FindingCase.case values
    when: CasePredicate | None = None
    # rules of harness.core.conventions that reproduce the finding exactly (scoped xfails),
    # in place of the declared conventions named in ``replaces``
    behaves_as: frozenset[str] = frozenset()
    replaces: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = set(self.suites or ()) - SUITES
        if unknown:
            known = sorted(SUITES)
            raise ValueError(f"KnownFinding: unknown suites {sorted(unknown)}; known: {known}")
        for rule in self.behaves_as | self.replaces:
            get_convention(rule)  # an unknown rule is refused where the finding is declared

    def matches(self, case: FindingCase) -> bool:
        return (
            (self.schemes is None or case.scheme in self.schemes)
            and (self.suites is None or case.suite in self.suites)
            and (self.out_dtypes is None or case.out_dtype in self.out_dtypes)
            and (self.cases is None or case.case in self.cases)
            and (self.when is None or bool(self.when(case)))
        )


FindingsDeclaration = Iterable[KnownFinding] | Mapping[str, str]


def matching_findings(plugin: object, case: FindingCase) -> list[KnownFinding]:
    """Every `KnownFinding` ``plugin`` declares that covers ``case``, in declared order
    (the deprecated mapping form gives none: it has no rules to scope by)."""
    declared: FindingsDeclaration = getattr(plugin, "known_findings", None) or ()
    if isinstance(declared, Mapping):
        return []
    return [f for f in declared if f.matches(case)]


def finding_rules(
    findings: list[KnownFinding], conventions: frozenset[str]
) -> frozenset[str] | None:
    """The conventions a case is held to if it does what its matching findings say: the
    declared ones less those the findings replace, plus their rules. None where a finding
    names no rules (it covers its whole case)."""
    if not findings or not all(f.behaves_as for f in findings):
        return None
    replaced = frozenset().union(*(f.replaces for f in findings))
    return (conventions - replaced) | frozenset().union(*(f.behaves_as for f in findings))


def known_finding(plugin: object, case: FindingCase) -> str | None:
    """The text of the first finding ``plugin`` declares that covers ``case``, if any.

    ``known_findings`` is a sequence of `KnownFinding` (first match wins), or the
    deprecated mapping of fnmatch patterns over test ids -> text (matched against
    ``case.id``)."""
    declared: FindingsDeclaration = getattr(plugin, "known_findings", None) or ()
    if isinstance(declared, Mapping):
        return next((text for pat, text in declared.items() if fnmatch(case.id, pat)), None)
    return next((f.text for f in declared if f.matches(case)), None)
