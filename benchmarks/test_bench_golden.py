"""Loading the whole golden store (manifest check, sha256, deserialization and unpacking of
every entry).

    python -m pytest benchmarks/test_bench_golden.py --benchmark-only

Target: every golden loads in under 1 s in total. The store's size is recorded in
``extra_info["store_bytes"]``; tests/store/test_committed_store.py holds it under 9 MiB.
"""

from __future__ import annotations

from typing import Any

from harness.store.golden_store import GoldenStore


def load_every_golden() -> int:
    store = GoldenStore()  # a fresh store: nothing cached
    entries = sorted(store.manifest()["entries"])
    for entry in entries:
        store.load(entry)
    return len(entries)


def test_load_every_golden(benchmark: Any) -> None:
    store = GoldenStore()
    files = list(store.root.rglob("*.safetensors"))
    benchmark.extra_info["store_bytes"] = sum(f.stat().st_size for f in files) + (
        store.manifest_path.stat().st_size
    )
    loaded = benchmark(load_every_golden)
    benchmark.extra_info["entries"] = loaded
    assert loaded == len(files), f"{loaded} manifest entries for {len(files)} golden files"
