"""The CLI contract under bad input: pytest arguments pass through as documented, each kind of
outcome has its own exit status (docs/CLI.md), a bug is one line (never a traceback), bad
environment values are refused before anything runs, and an empty run never replaces
reports/latest.json."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability_helpers import assert_clear_error

from harness import cli
from harness.errors import (
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EnvironmentValueError,
)
from harness.platform.devices import gpu_list_from_environment
from harness.plugin import pin_worker_gpu

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("argv", "pytest_args", "ours"),
    [
        (["run", "-k", "fp8_per_tensor"], ["-k", "fp8_per_tensor"], {}),
        (["run", "-x"], ["-x"], {}),
        (["run", "-q"], ["-q"], {}),
        (["run", "--", "-k", "x"], ["-k", "x"], {}),
        (["run", "--workers", "0", "-k", "x"], ["-k", "x"], {"workers": "0"}),
        (["run", "--out=r.json", "-p", "no:randomly"], ["-p", "no:randomly"], {"out": "r.json"}),
        (["run", "--out", "r.json", "--", "--out", "x"], ["--out", "x"], {"out": "r.json"}),
        (["run"], [], {"workers": "auto", "out": None}),
        (["selftest", "-k", "x"], ["-k", "x"], {}),
        (["selftest", "--workers", "2", "-x", "tests"], ["-x", "tests"], {"workers": "2"}),
    ],
)
def test_pytest_arguments_pass_through(argv: list[str], pytest_args, ours) -> None:
    args = cli.build_parser().parse_args(argv)
    assert args.pytest_args == pytest_args
    for name, value in ours.items():
        assert getattr(args, name) == value


def test_other_commands_still_refuse_unknown_arguments(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["golden", "check", "-k", "x"])
    assert info.value.code == EXIT_USAGE
    assert "unrecognized arguments: -k" in capsys.readouterr().err


def _fail_with(exc: BaseException):
    def command(args) -> int:
        raise exc

    return command


@pytest.mark.parametrize(
    ("exc", "status", "words"),
    [
        (RuntimeError("boom\nsecond line"), EXIT_INTERNAL, "internal error: RuntimeError"),
        (KeyError("x"), EXIT_INTERNAL, "QHARNESS_TRACEBACK=1"),
        (KeyboardInterrupt(), EXIT_INTERRUPTED, "interrupted"),
        (EnvironmentValueError("bad\nvalue"), EXIT_USAGE, "error: bad value"),
    ],
)
def test_each_kind_of_failure_has_its_exit_status_and_one_line(
    monkeypatch, capsys, exc: BaseException, status: int, words: str
) -> None:
    monkeypatch.setattr("harness.cli.schemes.cmd_schemes", _fail_with(exc))
    assert cli.main(["schemes"]) == status
    err = capsys.readouterr().err
    assert_clear_error(err, words)


def test_exit_codes_are_distinct() -> None:
    codes = [EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED]
    assert len(set(codes)) == len(codes)
    # pytest's own statuses map onto these, never onto a neighbour's meaning.
    assert [cli.exit_for_pytest(s) for s in range(6)] == [
        EXIT_OK,
        EXIT_FAILED,
        EXIT_INTERRUPTED,
        EXIT_INTERNAL,
        EXIT_USAGE,
        EXIT_FAILED,
    ]


bad_gpu_lists = st.one_of(
    st.sampled_from(["abc", "-1", "0,-1", "1.5", "0,,1", "0,0", "GPU-x", "١", "0x1", " , a"]),
    st.text(min_size=1, max_size=8).filter(
        lambda v: (
            v.strip() and not all(p.strip().isascii() and p.strip().isdigit() for p in v.split(","))
        )
    ),
)


@settings(max_examples=40, deadline=None)
@given(value=bad_gpu_lists)
def test_bad_gpu_lists_are_refused(value: str) -> None:
    with pytest.raises(EnvironmentValueError) as info:
        gpu_list_from_environment({"QHARNESS_GPUS": value})
    assert_clear_error(str(info.value), "QHARNESS_GPUS")
    env = {"QHARNESS_GPUS": value, "PYTEST_XDIST_WORKER": "gw0"}
    with pytest.raises(EnvironmentValueError):
        pin_worker_gpu(env)
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_bad_gpu_list_is_a_pytest_usage_error(pytester: pytest.Pytester, monkeypatch) -> None:
    """Straight `pytest --qharness` (no CLI) refuses it too, before any worker starts."""
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    monkeypatch.setenv("QHARNESS_GPUS", "-1")
    result = pytester.runpytest_inprocess("--qharness", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "QHARNESS_GPUS='-1'" in result.stderr.str()


def test_bad_gpu_list_stops_run_before_pytest_starts(monkeypatch, capsys) -> None:
    monkeypatch.setenv("QHARNESS_GPUS", "abc")
    monkeypatch.setattr(subprocess, "call", _fail_with(AssertionError("pytest was started")))
    assert cli.main(["run", "-k", "x"]) == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "QHARNESS_GPUS", "'abc'")


def _run_options() -> set[str]:
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(subparsers.choices["run"]._option_string_actions)


def test_a_run_that_selects_nothing_keeps_latest_json(tmp_path: Path, capsys) -> None:
    """Reported: `run -- -k x` handed '-k' to pytest as a path and replaced latest.json with
    an empty run. Now the arguments reach pytest, and an empty run promotes nothing."""
    latest = tmp_path / "latest.json"
    latest.write_text('{"kept": true}')
    out = tmp_path / "results.json"
    ours = ["--workers", "0", "--out", str(out)]
    if "--reports-dir" in _run_options():  # where latest.json lives when run has that option
        ours += ["--reports-dir", str(tmp_path)]
    status = cli.main(["run", *ours, "--", "-k", "no_test_is_named_this"])
    assert status == EXIT_FAILED  # pytest 5, "no tests ran", counts as a failure
    assert json.loads(latest.read_text()) == {"kept": True}
    assert "no tests ran" in capsys.readouterr().err


@pytest.mark.parametrize("workers", ["abc", "-1", "1.5", "", "٣"])
def test_bad_worker_counts_are_usage_errors(capsys, workers: str) -> None:
    with pytest.raises(SystemExit) as info:
        cli.build_parser().parse_args(["run", "--workers", workers])
    assert info.value.code == EXIT_USAGE
    assert "--workers" in capsys.readouterr().err


def test_every_error_class_in_the_harness_derives_from_the_one_base() -> None:
    """The CLI turns `QHarnessError` into one line; any other exception class defined in the
    harness would escape as exit 3."""
    import importlib
    import importlib.util
    import inspect
    import pkgutil

    import harness
    from harness.errors import QHarnessError

    # Modules that import an optional dependency at import time: walked where it is installed.
    needs = {"harness.platform.triton_kernels": "triton"}
    found = []
    for info in pkgutil.walk_packages(harness.__path__, "harness."):
        if info.name == "harness.__main__":  # importing it runs the CLI
            continue
        if info.name == "harness.quantize":  # the deprecated shim: re-exports, defines none
            continue
        dependency = needs.get(info.name)
        if dependency is not None and importlib.util.find_spec(dependency) is None:
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    assert len(found) >= 5
    assert [c.__qualname__ for c in found if not issubclass(c, QHarnessError)] == []
