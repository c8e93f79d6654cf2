"""The committed golden store: under its size budget, and every file in the current format."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.store.golden_format import serialize
from harness.store.golden_store import DEFAULT_ROOT, GoldenStore

# The budget for golden/ (every file, the manifest included): goldens travel with every
# clone and wheel. Sub-byte codes are packed and regenerable inputs stored as digests to
# stay within it (docs/CLI.md, "Golden store format"). A registered scheme adds about
# 200 KiB (its linear and MoE entries); 9 MiB since w_mxfp4_a_fp8_per_token took the store
# to 8.1 MiB.
STORE_BYTES_BUDGET = 9 * 2**20


def _store_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and ".refresh-journal" not in p.parts]


def test_the_store_stays_under_its_size_budget() -> None:
    files = _store_files(DEFAULT_ROOT)
    total = sum(p.stat().st_size for p in files)
    assert any(p.suffix == ".safetensors" for p in files), f"no goldens under {DEFAULT_ROOT}"
    assert total < STORE_BYTES_BUDGET, (
        f"golden/ holds {total:,} bytes, over its {STORE_BYTES_BUDGET:,}-byte budget"
    )


@pytest.mark.parametrize("entry", sorted(GoldenStore().manifest()["entries"]))
def test_every_committed_file_is_in_the_current_format(entry: str) -> None:
    """Each file is exactly what a refresh writes for its tensors: packed where codes fit,
    one metadata key; a format-1 file (or one written by hand) shows up here."""
    store = GoldenStore()
    raw = store.file_for(entry).read_bytes()
    assert raw == serialize(store.load(entry)), f"{entry}: run python -m harness golden refresh"
