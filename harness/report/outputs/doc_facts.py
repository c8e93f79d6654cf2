"""Numbers and tables the docs state about the store, the suites and the history columns,
generated from the code.

A doc marks a generated block with ``<!-- facts:NAME -->`` ... ``<!-- /facts -->``;
`update_text` rewrites every such block from `FACTS`, and a self-test fails when a doc is
stale, so a count or a size in the docs can never drift from what the code produces.
Regenerate with ``python -m harness.report.outputs.doc_facts --write``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.report.reading.results import checks_markdown
from harness.report.reading.schema import markdown_columns
from harness.store.golden_format import MANIFEST_NAME
from harness.store.golden_store import DEFAULT_ROOT

DOCS_ROOT = DEFAULT_ROOT.parent
DOCUMENTS: tuple[str, ...] = (
    "README.md",
    "docs/SCHEMES.md",
    "docs/MOE.md",
    "docs/ARCHITECTURE.md",
    "docs/HISTORY.md",
    "docs/CLI.md",
)
_BLOCK = re.compile(r"(<!-- facts:([a-z0-9-]+) -->\n)(.*?)(<!-- /facts -->)", re.DOTALL)


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB" if n < 1024 * 1024 else f"{n / 2**20:.1f} MiB"


def golden_store_table(root: Path = DEFAULT_ROOT) -> str:
    """Entries and bytes per top-level group of the golden store, from its manifest."""
    entries = json.loads((root / MANIFEST_NAME).read_text())["entries"]
    groups: dict[str, list[int]] = defaultdict(list)
    for name, record in entries.items():
        groups[name.split("/")[0]].append(int(record["bytes"]))
    lines = ["| group | entries | size | largest entry |", "|---|---|---|---|"]
    for group, sizes in sorted(groups.items()):
        lines.append(f"| `{group}/` | {len(sizes)} | {_kib(sum(sizes))} | {_kib(max(sizes))} |")
    total = sum(sum(s) for s in groups.values())
    lines.append(f"| **total** | {len(entries)} | {_kib(total)} | |")
    return "\n".join(lines)


def moe_grid() -> str:
    from harness.moe.cases import (
        EXPERT_CONFIGS,
        MOE_HIDDEN,
        MOE_INTERMEDIATE,
        RENORMALIZE,
        TOKEN_COUNTS,
    )

    per = len(TOKEN_COUNTS) * len(EXPERT_CONFIGS) * len(RENORMALIZE)
    configs = "; ".join(f"{e} experts, top-{k}" for e, k in EXPERT_CONFIGS)
    return (
        f"tokens {TOKEN_COUNTS} x ({configs}) x renormalize (no, yes): {per} cases per "
        f"scheme and path; H = {MOE_HIDDEN}, I = {MOE_INTERMEDIATE}."
    )


def linear_grid() -> str:
    from harness.core.schemes import SCHEMES
    from harness.linear.cases import LINEAR_SHAPES

    shapes = ", ".join(f"{m}x{n}x{k}" for m, n, k in LINEAR_SHAPES)
    return f"{len(SCHEMES)} registered schemes; linear shapes (MxNxK): {shapes}."


FACTS: dict[str, Callable[[], str]] = {
    "golden-store": golden_store_table,
    "moe-grid": moe_grid,
    "linear-grid": linear_grid,
    "history-columns": markdown_columns,  # the field table's (harness.report.reading.schema)
    "record-checks": checks_markdown,  # results validation's, from the field table
}


def update_text(text: str) -> str:
    """``text`` with every facts block regenerated; unknown block names are an error."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in FACTS:
            raise KeyError(f"unknown facts block {name!r}; known: {sorted(FACTS)}")
        return f"{match.group(1)}{FACTS[name]()}\n{match.group(4)}"

    return _BLOCK.sub(fill, text)


def stale(documents: Iterable[str] = DOCUMENTS, root: Path = DOCS_ROOT) -> list[str]:
    """The documents whose generated blocks differ from what the code produces now."""
    return [d for d in documents if update_text((root / d).read_text()) != (root / d).read_text()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite stale documents")
    args = parser.parse_args()
    for doc in stale():
        if args.write:
            path = DOCS_ROOT / doc
            path.write_text(update_text(path.read_text()))
        print(f"{'updated' if args.write else 'stale'}: {doc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
