"""The command-line contract: names, JSON fields, exit codes, one-line errors."""

from __future__ import annotations

import json

from harness.core.schemes import SCHEMES


def test_platform_json_reports_cpu_and_probed_fp8_capabilities(cli) -> None:
    result = cli("platform", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["platform"]["device"] == "cpu"
    assert report["platform"]["is_cuda_alike"] is False
    assert report["platform"]["fp8_dtype"] == "float8_e4m3fn"
    caps = report["capabilities"]
    # torch >= 2.13 CPU builds really run FP8 _scaled_mm; the probe must find it.
    for name in ("scaled_mm.tensorwise.e4m3fn", "scaled_mm.rowwise.e4m3fn"):
        assert caps[name]["available"] is True, caps[name]
        assert caps[name]["detail"] == "ok"
    assert report["expected_missing"] == []
    assert set(report["support"]) == set(SCHEMES)
    assert report["support"]["fp8_per_tensor"]["native"]["supported"] is True


def test_platform_text_lists_every_probe(cli) -> None:
    result = cli("platform")
    assert result.returncode == 0, result.stderr
    assert "scaled_mm.rowwise.e4m3fn" in result.stdout
    assert "support matrix" in result.stdout


def test_schemes_json_lists_every_registered_scheme(cli) -> None:
    result = cli("schemes", "--json")
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [s["name"] for s in listed] == sorted(SCHEMES)
    first = listed[0]
    assert {"name", "family", "weight", "activation", "sqnr_floor_db", "description"} <= set(first)
    assert {"format", "granularity", "scale_format", "scale_rounding"} <= set(first["weight"])


def test_unknown_scheme_is_a_one_line_usage_error(cli) -> None:
    result = cli("schemes", "fp8_per_tensr")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "unknown scheme 'fp8_per_tensr'" in result.stderr
    assert "fp8_per_tensor" in result.stderr  # it lists the known names
    assert "Traceback" not in result.stderr


def test_golden_check_on_a_missing_store_fails_clearly(cli, tmp_path) -> None:
    result = cli("golden", "check", "--root", str(tmp_path / "nowhere"), "--only", "linear/*")
    assert result.returncode == 1
    assert "is missing" in result.stderr
    assert "golden refresh --only" in result.stderr
    assert "Traceback" not in result.stderr


def test_golden_refresh_with_unmatched_pattern_is_a_usage_error(cli, tmp_path) -> None:
    result = cli("golden", "refresh", "--root", str(tmp_path), "--only", "nope/*")
    assert result.returncode == 2
    assert "matches no golden entry" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_report_without_results_is_a_usage_error(cli, tmp_path) -> None:
    result = cli("report", "--results", str(tmp_path / "none.json"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr


def test_golden_check_with_unmatched_pattern_is_a_usage_error(cli) -> None:
    result = cli("golden", "check", "--only", "nonexistent/*")
    assert result.returncode == 2
    assert "matches no golden entry" in result.stderr


def test_run_refuses_a_keyword_pytest_cannot_parse_before_starting(cli, tmp_path) -> None:
    """Under xdist an unparsable -k crashes every worker (INTERNALERROR); `run` says why."""
    reports = tmp_path / "reports"
    result = cli("run", "--reports-dir", str(reports), "-k", "w_mxfp4_a_mxfp4@ceil")
    assert result.returncode == 2
    assert "w_mxfp4_a_mxfp4 and ceil" in result.stderr  # how to select it instead
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert not reports.exists()  # no run directory for a run that never started
