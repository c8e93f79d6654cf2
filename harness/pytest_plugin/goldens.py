"""Reading goldens in a suite: a missing or stale entry fails the test with the store's
message (what is wrong and the ``golden refresh`` command that fixes it), no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness.store.golden_registry import GoldenData
    from harness.store.golden_store import GoldenStore


@contextmanager
def golden_failures() -> Iterator[None]:
    """Turn a `GoldenError` raised inside (loading, or checking regenerated inputs against
    their digests) into a test failure carrying its message."""
    from harness.store.golden_errors import GoldenError

    try:
        yield
    except GoldenError as exc:
        pytest.fail(str(exc), pytrace=False)


def load_golden(store: GoldenStore, entry: str) -> GoldenData:
    """Golden ``entry`` from ``store``, or the test fails with the store's message."""
    with golden_failures():
        return store.load(entry)
    raise AssertionError("unreachable: pytest.fail raises")  # for type checkers
