"""What the plugin writes for every kind of suite test, the reader accepts, so a real run
becomes ``reports/latest`` with its summary and page (a writer/reader disagreement once
left every full run without them)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

# One test of each record shape: no case fields (platform), a scheme with a null path
# (a loading test that runs no path), quantizer edge cases, and a full linear case.
SELECTION = (
    "test_expected_capabilities_are_present"
    " or (test_quantizer_on_mx_edge_cases and reference and e2m1)"
    " or (test_loaded_shards_dequantize_to_checkpoint and fp8_per_tensor-unfused-e4m3fn-fp8)"
    " or (test_linear and fp8_per_tensor-emulated-37x16x128-bias-bf16)"
)


def test_a_real_run_becomes_latest(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    done = run_cli("run", "--workers", "0", "--reports-dir", str(reports), "-k", SELECTION)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no results recorded" not in done.stderr, done.stderr
    latest = reports / "latest"
    assert (latest / "results.json").is_file(), sorted(p.name for p in reports.iterdir())
    assert (latest / "summary.md").is_file()
    assert (latest / "report.html").is_file()
