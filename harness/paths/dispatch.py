"""Dispatch tables: which native kernel runs which scheme on which platform, as data.

One type for linear and MoE. A table maps a platform key (`harness.platform.info.platform_key`:
"cpu", or a GPU architecture such as "sm_90", "gfx942"; or `ANY_PLATFORM` for a row that
holds everywhere without a row of its own) to a row; a row maps a decision (a kernel name,
or `EMULATE`) to the explicit frozenset of scheme names it takes. Every scheme is named;
nothing is decided from a name's prefix (a prefix test once sent w_mxfp4_a_mxfp6_*
schemes to a kernel that only ran pure w_mxfp4).

`dispatch_problems` checks a table against the scheme registry and each kernel's own
contract (`KernelContract.accepts`); `choose` is what a native path calls at run time, and
it refuses a scheme the chosen kernel does not accept, so a bad table never reaches a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.core.schemes import SCHEMES, Scheme
from harness.paths.base import KernelContract
from harness.platform.info import PlatformInfo

EMULATE = "emulate"  # decision: no native kernel; the emulated path is the only one
ANY_PLATFORM = "*"  # row key: the row for every platform without a row of its own

DispatchRow = Mapping[str, frozenset[str]]  # decision -> scheme names
DispatchTable = Mapping[str, DispatchRow]  # platform key -> row

K = TypeVar("K", bound=KernelContract)

FP8_E4M3_FLAVOURS = frozenset({"e4m3fn", "e4m3fnuz"})  # the same bits, values a factor 2 apart


def rest_emulated(
    modes: Mapping[str, frozenset[str]], schemes: Mapping[str, Scheme] | frozenset[str]
) -> DispatchRow:
    """A dispatch row: each kernel's (or mode's) schemes as given, every other scheme of
    ``schemes`` (the registry the table is checked against) `EMULATE`: the path does not
    run it, the emulated path does. One policy for every adapter's table, so a new scheme
    has a decision in each without an edit there."""
    row = dict(modes)
    row[EMULATE] = frozenset(schemes) - frozenset().union(*modes.values())
    return row


def row_for(table: DispatchTable, key: str) -> DispatchRow | None:
    """The row that applies on platform ``key``: its own, else `ANY_PLATFORM`'s, else None."""
    row = table.get(key)
    return table.get(ANY_PLATFORM) if row is None else row


def decision(table: DispatchTable, key: str, scheme_name: str) -> str | None:
    """The decision for one scheme on one platform key; None when the table has none."""
    row = row_for(table, key)
    if row is None:
        return None
    found = [d for d, names in row.items() if scheme_name in names]
    if len(found) > 1:
        raise ValueError(f"dispatch row {key!r} gives {scheme_name!r} two decisions: {found}")
    return found[0] if found else None


@dataclass(frozen=True)
class Choice(Generic[K]):
    """What a table chose for a scheme here: a kernel, or the decision and why none runs."""

    kernel: K | None
    decision: str | None
    reason: str = ""  # why no kernel runs (empty when one does)


def choose(
    table: DispatchTable,
    kernels: Mapping[str, K],
    key: str,
    scheme: Scheme,
    label: str,
    home: str,
) -> Choice[K]:
    """The kernel ``table`` sends ``scheme`` to on platform ``key``, if its contract agrees.

    ``label`` names the table in reasons ("MoE dispatch"); ``home`` says where it is
    defined, so a missing row says where to add one.
    """
    if row_for(table, key) is None:
        return Choice(None, None, f"no {label} row for platform {key!r}; add one to {home}")
    dec = decision(table, key, scheme.name)
    if dec is None:
        return Choice(None, None, f"{label} row {key!r} has no decision for {scheme.name}")
    if dec == EMULATE:
        return Choice(None, dec, f"{label} table: {scheme.name} is emulated on {key}")
    kernel = kernels.get(dec)
    if kernel is None:
        return Choice(None, dec, f"{label} table names unknown kernel {dec!r}")
    accepted = kernel.accepts(scheme)
    if not accepted.ok and SCHEMES.get(scheme.name) != scheme:
        # a variant of the registered recipe (other blocks: harness.linear.designs): the
        # table is right, the kernel takes the registered parameters only
        return Choice(None, dec, f"{dec} takes {scheme.name} as registered, not: {accepted.reason}")
    if not accepted.ok:
        return Choice(
            None, dec, f"dispatch table error: {dec} cannot run {scheme.name}: {accepted.reason}"
        )
    return Choice(kernel, dec)


def dispatch_problems(
    schemes: Mapping[str, Scheme],
    kernels: Mapping[str, KernelContract],
    table: DispatchTable,
) -> list[str]:
    """Everything wrong with ``table``; empty when every check holds.

    * every registered scheme has exactly one decision in every row;
    * every name in the table is a registered scheme;
    * every decision is `EMULATE` or a known kernel, and every registered scheme sent to a
      kernel is one that kernel's contract (`accepts`) says it can run.
    """
    problems: list[str] = []
    for key, row in sorted(table.items()):
        seen: dict[str, str] = {}
        for dec, names in sorted(row.items()):
            if dec != EMULATE and dec not in kernels:
                problems.append(
                    f"row {key!r}: decision {dec!r} is neither {EMULATE!r} nor a known "
                    f"kernel ({sorted(kernels)})"
                )
                continue
            for name in sorted(names):
                if name in seen:
                    problems.append(
                        f"row {key!r}: scheme {name!r} has two decisions ({seen[name]!r}, {dec!r})"
                    )
                seen[name] = dec
                if name not in schemes:
                    problems.append(
                        f"row {key!r}: {name!r} is not a registered scheme; fix the name or "
                        "register the scheme"
                    )
                    continue
                if dec != EMULATE:
                    accepted = kernels[dec].accepts(schemes[name])
                    if not accepted.ok:
                        problems.append(
                            f"row {key!r} sends {name!r} to {dec!r}, which cannot run it: "
                            f"{accepted.reason}"
                        )
        for name in sorted(set(schemes) - set(seen)):
            problems.append(f"row {key!r}: registered scheme {name!r} has no decision")
    return problems


def native_decisions(row: DispatchRow) -> dict[str, str]:
    """Scheme name -> kernel name for every scheme a row sends to a kernel."""
    return {name: dec for dec, names in row.items() if dec != EMULATE for name in sorted(names)}


def table_json(table: DispatchTable) -> dict[str, dict[str, list[str]]]:
    """The table with sorted lists, for JSON output."""
    return {
        key: {dec: sorted(names) for dec, names in sorted(row.items())}
        for key, row in sorted(table.items())
    }


def foreign_fp8_flavour(scheme: Scheme, platform: PlatformInfo) -> str | None:
    """Why a GPU kernel of ``platform`` cannot take ``scheme``'s FP8 codes as they are, or None.

    A table row decides by scheme name, but a loaded layer keeps its name when a loader
    normalizes it for another platform's e4m3 flavour (harness.loading.transforms): its codes
    then mean twice or half as much under the platform's dtype, and a kernel that views them
    as that dtype computes a wrong result without a sign. A GPU arch runs one flavour
    (`PlatformInfo.fp8_format`); a layer in the other must be normalized first.
    """
    for role, spec in (("weight", scheme.weight), ("activation", scheme.activation)):
        if spec is None or spec.format not in FP8_E4M3_FLAVOURS:
            continue
        if spec.format != platform.fp8_format:
            return (
                f"{scheme.name}: {role} codes in {spec.format}, but {platform.arch} kernels "
                f"take {platform.fp8_format} (a layer loaded for the other FP8 flavour)"
            )
    return None
