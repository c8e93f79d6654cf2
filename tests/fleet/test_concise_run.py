"""A green `run` is concise: each skip reason is printed once (qharness's skips by reason),
not again by pytest's -ra summary and a full text report; the details are in the run
directory, whose files the last lines name."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.hang_guard import HANG_GUARD_S

SUBSET = "test_linear and 1x16x256 and bias-bf16 and (w_mxfp4 or fp8_per_tensor) and not fnuz"


def test_green_run_prints_each_skip_reason_once(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--reports-dir", str(tmp_path / "reports"),
         "--workers", "0", "--", "-k", SUBSET],
        cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = done.stdout
    run = (tmp_path / "reports" / "latest").resolve()
    reasons = json.loads((run / "results.json").read_text())["summary"]["skip_reasons"]
    assert reasons  # w_mxfp4 has no native kernel: its native cases skip on every platform
    for reason in reasons:
        assert out.count(reason) == 1, (reason, out)
    assert "SKIPPED [" not in out
    assert "## Linear SQNR" not in out
    assert f"details: {run / 'summary.md'}" in out
    assert re.search(rf"qharness: \d+ passed, \d+ skipped \({len(reasons)} skip reason", out)
    assert len(out.splitlines()) < 12 + len(reasons)
