"""Helpers shared by the harness self-tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m harness ARGS`` in a subprocess from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=HANG_GUARD_S,
    )


@pytest.fixture
def cli():
    return run_cli
