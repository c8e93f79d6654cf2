"""The golden store's public names, where adapters and other projects import them.

The store itself is split by job: `golden_registry` (builders, `GoldenData`, seeded-input
digests), `golden_format` (file format, manifest, layout), `golden_diff`, `golden_store`
(`GoldenStore`), `golden_refresh` and `golden_journal`; code inside qharness imports from
those.
"""

from __future__ import annotations

from harness.store.golden_errors import GoldenError
from harness.store.golden_registry import GoldenData, regenerated, register_each, register_golden
from harness.store.golden_store import GoldenStore

__all__ = [
    "GoldenData",
    "GoldenError",
    "GoldenStore",
    "regenerated",
    "register_each",
    "register_golden",
]
