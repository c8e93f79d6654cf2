"""``golden refresh|check``: rebuild the golden store, or check its integrity and that every
entry still recomputes to what is stored."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.errors import EXIT_FAILED, EXIT_OK, UnsafePathError, UsageError
from harness.store.locations import golden_root as shipped_golden_root


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("golden", help="refresh or check the golden store")
    p.add_argument("action", choices=["refresh", "check"])
    p.add_argument("--only", help="glob over entry names, e.g. 'linear/fp8_*'")
    p.add_argument("--root", default=str(shipped_golden_root()), help="golden store directory")
    p.add_argument("--no-recompute", action="store_true", help="check: integrity only")
    p.set_defaults(func=cmd_golden)


def cmd_golden(args: argparse.Namespace) -> int:
    from harness.catalog import golden_builders
    from harness.store.golden import GoldenError, GoldenStore

    store = GoldenStore(_golden_root(args.root), entry_builders=golden_builders())
    if args.action == "refresh":
        try:
            changes = store.refresh(only=args.only)
        except GoldenError as exc:
            raise UsageError(str(exc)) from exc
        counts: dict[str, int] = {}
        for c in changes:
            counts[c.status] = counts.get(c.status, 0) + 1
        print("refresh: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return EXIT_OK
    try:
        problems = store.check(recompute=not args.no_recompute, only=args.only)
    except GoldenError as exc:
        raise UsageError(str(exc)) from exc
    if problems:
        print(f"golden check FAILED ({len(problems)} problem(s)):", file=sys.stderr)
        for line in problems:
            print(f"  - {line}", file=sys.stderr)
        return EXIT_FAILED
    print(f"golden check passed: {store.root}")
    return EXIT_OK


def _golden_root(root: str) -> Path:
    """``--root``: a directory path, never a file, a NUL or the file-system root."""
    if not root or "\0" in root:
        raise UsageError(f"--root {root!r} is not a usable directory path")
    path = Path(root).expanduser()
    resolved = path.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise UnsafePathError(f"--root {root} is a file-system root or the home directory")
    if path.exists() and not path.is_dir():
        raise UsageError(f"--root {root} is not a directory")
    return path
