"""The checks catch real mistakes: deliberately wrong numerics must fail the golden check.

Each test plants one mistake seen in real stacks (ties-away element rounding, the wrong
E8M0 scale mode) and shows `golden check` reports the affected entries, while the
unmutated code passes the same check.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import harness.core.quantize
from harness.catalog import golden_builders
from harness.core.fastcodec import E8M0Rule, e8m0_rule
from harness.core.formats import decode, encode
from harness.core.scales import SCALE_RULES
from harness.store.golden_store import GoldenStore
from tests.canaries.common import encode_ties_away

ENTRIES = ("linear/w_mxfp4_a_mxfp4", "linear/fp8_per_channel", "mx_scales/e4m3fn")


def test_ties_away_differs_from_rne_on_the_known_case() -> None:
    assert decode(encode_ties_away(torch.tensor([400.0]), "e4m3fn"), "e4m3fn").item() == 416.0
    assert decode(encode(torch.tensor([400.0]), "e4m3fn"), "e4m3fn").item() == 384.0


@pytest.fixture
def golden_store(golden_store: GoldenStore) -> GoldenStore:
    """The committed store with every suite's builders, so check() recomputes entries."""
    return GoldenStore(golden_store.root, entry_builders=golden_builders())


@pytest.mark.parametrize("entry", ENTRIES)
def test_unmutated_code_passes_the_golden_check(entry: str, golden_store: GoldenStore) -> None:
    assert golden_store.check(only=entry) == []


@pytest.mark.parametrize("entry", ["linear/w_mxfp4_a_mxfp4", "linear/fp8_per_channel"])
def test_ties_away_rounding_is_caught(
    entry: str, golden_store: GoldenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # both element codecs the quantizer may use (reference and fast) get the mutation

    def divide_and_encode_ties_away(x: torch.Tensor, scale: torch.Tensor, enc: Any) -> Any:
        return encode_ties_away(x / scale, enc.fmt, enc.bound)

    monkeypatch.setattr(harness.core.quantize, "encode", encode_ties_away)
    monkeypatch.setattr(harness.core.quantize, "encode_fast", encode_ties_away)
    monkeypatch.setattr(harness.core.quantize, "divide_and_encode", divide_and_encode_ties_away)
    problems = golden_store.check(only=entry)
    assert len(problems) == 1, problems
    assert "codes" in problems[0], problems


@pytest.mark.parametrize("entry", ["mx_scales/e4m3fn", "linear/w_mxfp4_a_mxfp4"])
def test_wrong_scale_mode_is_caught(
    entry: str, golden_store: GoldenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel stack using rceil where the scheme says floor (the OCP spec)."""
    monkeypatch.setitem(SCALE_RULES, "floor", SCALE_RULES["rceil"])

    def rceil_for_floor(mode: str, fmt: Any) -> E8M0Rule:
        return e8m0_rule("rceil" if mode == "floor" else mode, fmt)

    monkeypatch.setattr(harness.core.quantize, "e8m0_rule", rceil_for_floor)
    problems: list[Any] = golden_store.check(only=entry)
    assert len(problems) == 1, problems
    assert "scale" in problems[0], problems
