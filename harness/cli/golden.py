"""``golden refresh|check``: rebuild the golden store, or check its integrity and that every
entry still recomputes to what is stored."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
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


# torch's CPU kernels for randn, linspace and pow differ in the last float32 bit between
# its ISA builds (measured: default vs avx2 on one machine), and a rare element then lands
# on the other side of a bf16 rounding of a seeded input, so a golden made on an AVX-512
# machine read as stale on an AVX2 one. Goldens are made and checked with the AVX2 kernels,
# which every x86-64 CPU that has AVX2 runs, whatever else it has.
CAPABILITY_ENV = "ATEN_CPU_CAPABILITY"
PINNED_CAPABILITY = "avx2"
# The BLAS and oneDNN inside torch pick their kernels from the CPU on their own: held to AVX2 too.
LIBRARY_PINS = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pinned_kernels_env() -> dict[str, str] | None:
    """The environment for a golden child with torch's CPU kernels pinned to
    `PINNED_CAPABILITY`, or None where this process already is, or cannot be (not x86-64,
    or a CPU without AVX2: its goldens may then differ in rare bits, and the check says so).
    """
    if os.environ.get(CAPABILITY_ENV) == PINNED_CAPABILITY:
        return None
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    import torch

    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        return None
    return {**os.environ, **LIBRARY_PINS, CAPABILITY_ENV: PINNED_CAPABILITY}


def _golden_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "harness", "golden", args.action, "--root", args.root]
    if args.only is not None:
        argv += ["--only", args.only]
    if args.no_recompute:
        argv.append("--no-recompute")
    return argv


def cmd_golden(args: argparse.Namespace) -> int:
    recomputes = args.action == "refresh" or not args.no_recompute
    env = pinned_kernels_env() if recomputes else None
    if env is not None:  # recompute in a child whose torch runs the pinned kernels
        done = subprocess.run(_golden_argv(args), env=env, capture_output=True, text=True)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
    from harness.catalog import golden_builders
    from harness.store.golden_errors import GoldenError
    from harness.store.golden_store import GoldenStore

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
    kernels = os.environ.get(CAPABILITY_ENV, "torch's default for this CPU")
    print(f"golden check passed: {store.root} (CPU kernels: {kernels})")
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
