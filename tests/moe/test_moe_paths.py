"""The MoE path registry: built-ins plus the ``qharness.moe_paths`` entry-point group."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import harness.moe.paths as registry
import harness.registry
from harness.moe.paths.emulated import EmulatedMoEPath
from harness.registry import PluginError, PluginFamily


class _EntryPoint:
    def __init__(self, name: str, obj: Any) -> None:
        self.name, self.value, self._obj = name, f"fake:{name}", obj

    def load(self) -> Any:
        return self._obj


class _Renamed(EmulatedMoEPath):
    name = "plugin_emulated"


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_EntryPoint]]:
    found: list[_EntryPoint] = []
    monkeypatch.setattr(
        harness.registry,
        "entry_points",
        lambda group: list(found) if group == registry.ENTRY_POINT_GROUP else [],
    )
    registry.moe_paths.cache_clear()
    yield found
    registry.moe_paths.cache_clear()


def test_builtins_come_first(fake_entry_points: list[_EntryPoint]) -> None:
    assert list(registry.moe_paths()) == ["emulated", "native"]


def test_entry_point_path_is_registered(fake_entry_points: list[_EntryPoint]) -> None:
    fake_entry_points.append(_EntryPoint("mine", _Renamed))  # a class: called with no args
    assert list(registry.moe_paths()) == ["emulated", "native", "plugin_emulated"]
    assert isinstance(registry.get_moe_path("plugin_emulated"), _Renamed)


class _Numbered(EmulatedMoEPath):
    def __init__(self, i: int) -> None:
        self.name = f"plugin_emulated_{i}"


def test_a_family_registers_each_of_its_members(fake_entry_points: list[_EntryPoint]) -> None:
    """One entry point, as many paths as its factory builds when the registry loads."""
    family = PluginFamily(lambda: [_Numbered(1), _Numbered(2)])
    fake_entry_points.append(_EntryPoint("family", family))
    assert list(registry.moe_paths())[2:] == ["plugin_emulated_1", "plugin_emulated_2"]


def test_a_family_member_without_the_protocol_is_refused(
    fake_entry_points: list[_EntryPoint],
) -> None:
    fake_entry_points.append(_EntryPoint("family", PluginFamily(lambda: [_Numbered(1), object()])))
    with pytest.raises(PluginError, match=r"'family'.*not a MoEPath"):
        registry.moe_paths()


def test_object_without_the_protocol_is_refused(fake_entry_points: list[_EntryPoint]) -> None:
    fake_entry_points.append(_EntryPoint("broken", object()))
    with pytest.raises(PluginError, match=r"'broken'.*not a MoEPath; see docs/MOE\.md"):
        registry.moe_paths()


def test_duplicate_names_are_refused(fake_entry_points: list[_EntryPoint]) -> None:
    fake_entry_points.append(_EntryPoint("dup", EmulatedMoEPath()))
    with pytest.raises(PluginError, match="two MoE paths are named 'emulated'"):
        registry.moe_paths()


def test_unknown_path_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown MoE path 'nope'; known: \['emulated', 'native'"):
        registry.get_moe_path("nope")
