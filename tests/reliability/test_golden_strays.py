"""Reported: stray non-safetensors files in `golden/` passed the audit. The store owns every
file in it: anything but the manifest and its entries' files is a problem `golden check`
names, one line per file, and the check fails (exit 1, like an unlisted entry file)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from reliability_helpers import OLD_BUILDERS, assert_clear_error, make_store

from harness.store.golden_store import GoldenStore
from harness.store.locations import golden_root

STRAYS = (
    "suite/foo.txt",
    "x.pt",
    "suite/a.safetensors.bak",
    ".hidden/y.safetensors",
    "my copy/a.safetensors",
)


@pytest.mark.parametrize("stray", STRAYS)
def test_a_stray_file_is_named_by_the_check(tmp_path: Path, stray: str) -> None:
    root = tmp_path / "golden"
    make_store(root)
    assert GoldenStore(root, entry_builders=OLD_BUILDERS).check() == []
    (root / stray).parent.mkdir(parents=True, exist_ok=True)
    (root / stray).write_bytes(b"not a golden")

    problems = GoldenStore(root, entry_builders=OLD_BUILDERS).check(recompute=False)

    assert len(problems) == 1, problems
    assert_clear_error(problems[0], str(root / stray), "stray file")


def test_a_fifo_and_a_symlinked_directory_are_strays_and_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "golden"
    make_store(root)
    os.mkfifo(root / "suite" / "pipe")
    (root / "elsewhere").symlink_to(tmp_path)

    problems = GoldenStore(root, entry_builders=OLD_BUILDERS).check(recompute=False)

    assert [p.split(":")[0] for p in problems] == [
        str(root / "elsewhere"),
        str(root / "suite/pipe"),
    ]


def test_the_refresh_journal_is_the_stores_own(tmp_path: Path) -> None:
    """An interrupted refresh's journal is rolled back when the store opens, never a stray."""
    root = tmp_path / "golden"
    make_store(root)
    journal = root / ".refresh-journal" / "files" / "suite"
    journal.mkdir(parents=True)
    (journal / "a.safetensors").write_bytes(b"half written")
    assert GoldenStore(root, entry_builders=OLD_BUILDERS).check(recompute=False) == []


def test_cli_check_of_a_copy_of_the_real_store_with_a_stray_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    root = tmp_path / "golden"
    shutil.copytree(golden_root(), root)
    assert main(["golden", "check", "--no-recompute", "--root", str(root)]) == 0
    capsys.readouterr()
    (root / "linear" / "foo.txt").write_text("notes")

    assert main(["golden", "check", "--no-recompute", "--root", str(root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "golden check FAILED (1 problem(s)):"
    assert_clear_error(err[1], str(root / "linear" / "foo.txt"), "stray file")
