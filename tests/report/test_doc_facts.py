"""Counts and sizes in the docs are generated (harness/report/outputs/doc_facts.py), never stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.outputs import doc_facts


def test_generated_blocks_in_the_docs_are_current() -> None:
    assert doc_facts.stale() == [], "run: python -m harness.report.outputs.doc_facts --write"


def test_a_stale_block_is_found_and_rewritten() -> None:
    text = "intro\n<!-- facts:linear-grid -->\n99 schemes\n<!-- /facts -->\nend\n"
    updated = doc_facts.update_text(text)
    assert "99 schemes" not in updated
    assert doc_facts.linear_grid() in updated
    assert doc_facts.update_text(updated) == updated


def test_an_unknown_block_is_an_error() -> None:
    with pytest.raises(KeyError, match="unknown facts block 'nope'"):
        doc_facts.update_text("<!-- facts:nope -->\nx\n<!-- /facts -->\n")


def test_the_store_table_adds_up(tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.json").write_text(
        '{"entries": {"a/x": {"bytes": 2048}, "a/y": {"bytes": 1024}, "b/z": {"bytes": 512}}}'
    )
    table = doc_facts.golden_store_table(tmp_path)
    assert "| `a/` | 2 | 3 KiB | 2 KiB |" in table
    assert "| **total** | 3 | 4 KiB | |" in table
