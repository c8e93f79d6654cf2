"""Golden store errors, and the commands their messages suggest.

Every golden failure says what to run next; the command names the store it is about
(``--root``), so it can be pasted as it is.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from harness.errors import EXIT_FAILED, EXIT_USAGE, QHarnessError


class GoldenError(QHarnessError):
    """A golden entry that is missing, corrupted or stale; the message says what to do."""

    exit_code = EXIT_FAILED


class GoldenStoreBusyError(GoldenError):
    """Another process is refreshing this store; refused rather than interleaved."""

    exit_code = EXIT_USAGE


class GoldenUsageError(GoldenError):
    """A refresh or check asked for something the store cannot do (bad pattern, bad root)."""

    exit_code = EXIT_USAGE


def refresh_command(entry: str, root: Path | None = None) -> str:
    """The command that rebuilds ``entry`` in the store at ``root``: ``--root`` is added
    whenever that is not the default store, so the command can be pasted as it is."""
    return f"python -m harness golden refresh --only '{entry}'{root_option(root)}"


def root_option(root: Path | None) -> str:
    """`` --root DIR`` (absolute, shell-quoted) for a store other than the default one, or
    nothing: what a suggested command must carry to act on the store the user named."""
    if root is None or _is_default_root(root):
        return ""
    return f" --root {shlex.quote(os.path.abspath(root))}"


def _is_default_root(root: Path) -> bool:
    from harness.store.locations import golden_root

    return Path(root).resolve() == golden_root().resolve()


def missing_entry_hint(entry: str, root: Path) -> str:
    """What to do about a missing entry: never a refresh into an installed package's copy
    (site-packages); for another store, a refresh with its ``--root``."""
    from harness.store.locations import SHIPPED_ROOT

    resolved = Path(root).resolve()
    if resolved.is_relative_to(SHIPPED_ROOT.resolve()):
        return (
            "the goldens shipped with the installed qharness lack it (a damaged install: "
            "reinstall qharness), or point --qharness-golden / ini qharness_golden at a store "
            f"of your own and run: {refresh_command(entry)} --root DIR"
        )
    return f"create it with: {refresh_command(entry, root)}"
