"""`run` takes its own options wherever they stand among pytest's, and a pytest usage error
leaves no empty run directory behind (the next run would get a ``-2`` suffix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.errors import EXIT_USAGE
from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("argv", "pytest_args", "ours"),
    [
        (["run", "-k", "mykernel", "--reports-dir", "r"], ["-k", "mykernel"], {"reports_dir": "r"}),
        (["run", "-x", "--workers=0", "-q"], ["-x", "-q"], {"workers": "0"}),
        (["run", "-k", "x", "--bench", "tests", "--out", "o.json"], ["-k", "x", "tests"],
         {"bench": True, "out": "o.json"}),
        (["run", "-k", "x", "--", "--reports-dir", "r"], ["-k", "x", "--reports-dir", "r"],
         {"reports_dir": None}),
        (["selftest", "-x", "--workers", "2", "tests"], ["-x", "tests"], {"workers": "2"}),
    ],
)  # fmt: skip
def test_own_options_after_pytest_arguments(argv: list[str], pytest_args, ours) -> None:
    args = cli.build_parser().parse_args(argv)
    assert args.pytest_args == pytest_args
    for name, value in ours.items():
        assert getattr(args, name) == value


def test_reports_dir_after_k_is_ours(tmp_path: Path) -> None:
    """The issue's command: pytest never sees --reports-dir, and the run lands there."""
    reports = tmp_path / "reports"
    done = run_cli(
        "run", "--workers", "0", "-k", "test_linear and fp8_per_tensor and not fnuz and bf16",
        "--reports-dir", str(reports),
    )  # fmt: skip
    assert "unrecognized arguments" not in done.stderr, done.stderr
    assert (reports / "latest" / "results.json").is_file(), done.stdout + done.stderr
    assert len([p for p in reports.iterdir() if p.is_dir() and not p.is_symlink()]) == 1


def test_pytest_usage_error_leaves_no_run_directory(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    done = run_cli(
        "run", "--reports-dir", str(reports), "--workers", "0", "--no-such-pytest-option"
    )
    assert done.returncode == EXIT_USAGE, done.stdout + done.stderr
    assert "--no-such-pytest-option" in done.stderr
    left = sorted(p.name for p in reports.iterdir()) if reports.exists() else []
    assert left == [], left
