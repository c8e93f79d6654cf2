"""Loaders registered through the ``qharness.loaders`` entry-point group."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import harness.registry
from harness.loading.loaders import ENTRY_POINT_GROUP, FP8_LOADER, Loader, get_loader, loaders
from harness.registry import PluginError


@dataclass
class FakeEntryPoint:
    name: str
    value: str
    obj: Any

    def load(self) -> Any:
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeEntryPoint]]:
    """Entry points the registry will see; the registry cache is reset around the test."""
    found: list[FakeEntryPoint] = []

    def fake_entry_points(group: str) -> list[FakeEntryPoint]:
        return found if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(harness.registry, "entry_points", fake_entry_points)
    loaders.cache_clear()
    yield found
    loaders.cache_clear()


def test_plugin_loader_is_registered_after_the_builtins(plugins: list[FakeEntryPoint]) -> None:
    mine = FP8_LOADER.with_transforms(FP8_LOADER.transforms, "vendor")
    plugins.append(FakeEntryPoint("vendor", "vendor.loading:LOADER", lambda: mine))
    assert list(loaders()) == ["fp8", "quark", "vendor"]
    assert get_loader("vendor") is mine


def test_plugin_that_is_not_a_loader_is_refused(plugins: list[FakeEntryPoint]) -> None:
    plugins.append(FakeEntryPoint("bad", "vendor.loading:THING", object()))
    with pytest.raises(PluginError, match=r"'bad'.*not a Loader; see docs/LOADING\.md"):
        loaders()


def test_plugin_that_fails_to_import_is_named(plugins: list[FakeEntryPoint]) -> None:
    plugins.append(FakeEntryPoint("broken", "vendor.loading:X", ImportError("no vendor")))
    with pytest.raises(PluginError, match=r"'broken'.*ImportError: no vendor"):
        loaders()


def test_duplicate_loader_name_is_refused(plugins: list[FakeEntryPoint]) -> None:
    plugins.append(FakeEntryPoint("fp8", "vendor.loading:L", Loader("fp8", (), "clash")))
    with pytest.raises(PluginError, match="two loaders are named 'fp8'"):
        loaders()


def test_unknown_loader_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown loader 'nope'; known: \['fp8', 'quark'"):
        get_loader("nope")
