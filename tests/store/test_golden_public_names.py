"""The golden store's public names stay importable from `harness.store.golden`.

README and docs name `harness.store.golden` (register_each, register_golden, GoldenData,
GoldenStore, regenerated) and other projects' tests catch its GoldenError; the code lives in
the split modules, and this module must keep handing out the very same objects.
"""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "GoldenData": "harness.store.golden_registry",
    "GoldenError": "harness.store.golden_errors",
    "GoldenStore": "harness.store.golden_store",
    "regenerated": "harness.store.golden_registry",
    "register_each": "harness.store.golden_registry",
    "register_golden": "harness.store.golden_registry",
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_is_the_defining_modules_object(name: str) -> None:
    golden = importlib.import_module("harness.store.golden")
    assert getattr(golden, name) is getattr(importlib.import_module(PUBLIC[name]), name)


def test_the_public_module_lists_exactly_these_names() -> None:
    golden = importlib.import_module("harness.store.golden")
    assert sorted(golden.__all__) == sorted(PUBLIC)
