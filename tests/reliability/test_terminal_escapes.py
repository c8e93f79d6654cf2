"""What `run` prints from test outcomes reaches the terminal inert: a skip reason comes from
a plugin or a vendor library and may hold escape sequences or lines of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REASON = "no kernel\\x1b]0;owned\\x07\\x1b[2J\\n## forged heading"


def test_skips_by_reason_print_no_escape_sequence(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Reported: `run`'s own "skips by reason" section passed raw ESC sequences."""
    pytester.makepyfile(test_one=f"import pytest\n\ndef test_one():\n    pytest.skip('{REASON}')\n")
    results = tmp_path / "results.json"
    result = pytester.runpytest_inprocess(
        "--qharness", "-p", "no:cacheprovider", f"--qharness-results={results}"
    )
    out = result.stdout.str()
    assert "qharness: skips by reason" in out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "## forged heading" not in out.splitlines()
    assert "no kernel\\u001b]0;owned" in out  # the reason shown, its escapes as text
