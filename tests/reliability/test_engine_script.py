"""scripts/engine.py's failures are one line and an exit code, and a broken venv is repaired.

Offline and fast: venvs under tmp_path are made without ensurepip (slow, and the network is
not needed) and given a stub ``pip`` module that logs its arguments and exits with
``FAKE_PIP_STATUS``; the script runs in this process with its ``main()``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "engine.py"
STUB_PIP = """\
import os, sys
if sys.argv[1:] != ["--version"]:
    with open(os.environ["FAKE_PIP_LOG"], "a") as log:
        log.write(" ".join(sys.argv[1:]) + "\\n")
    sys.exit(int(os.environ.get("FAKE_PIP_STATUS", "0")))
print("pip 0 (stub)")
"""


def load_engine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("qharness_engine_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub_builder(interrupt: bool = False) -> type[venv.EnvBuilder]:
    """An EnvBuilder whose pip step installs the stub pip, or is interrupted by a Ctrl-C
    (what ensurepip leaves: a venv with a Python and no pip)."""

    class StubPipBuilder(venv.EnvBuilder):
        def __init__(self, **kwargs: Any) -> None:
            assert kwargs.get("with_pip"), "the engine's venv must be made with pip"
            super().__init__(**kwargs)

        def _setup_pip(self, context: SimpleNamespace) -> None:
            if interrupt:
                raise KeyboardInterrupt
            version = f"python{sys.version_info.major}.{sys.version_info.minor}"
            pip = Path(context.env_dir) / "lib" / version / "site-packages" / "pip"
            pip.mkdir(parents=True)
            (pip / "__init__.py").write_text("")
            (pip / "__main__.py").write_text(STUB_PIP)

    return StubPipBuilder


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """``engine(*args, builder=...)``: the script's main() with those arguments, its venv
    builder stubbed; returns (exit status, stdout, stderr)."""
    monkeypatch.setenv("FAKE_PIP_LOG", str(tmp_path / "pip.log"))
    monkeypatch.delenv("QHARNESS_TORCH_VERSION", raising=False)

    def call(*args: str, builder: type[venv.EnvBuilder] | None = None) -> tuple[int, str, str]:
        module = load_engine()
        monkeypatch.setattr(module.venv, "EnvBuilder", builder or stub_builder())
        monkeypatch.setattr(sys, "argv", ["engine.py", *args])
        out, err = tmp_path / "out.txt", tmp_path / "err.txt"
        with out.open("w") as stdout, err.open("w") as stderr:
            monkeypatch.setattr(sys, "stdout", stdout)
            monkeypatch.setattr(sys, "stderr", stderr)
            try:
                status = module.main()
            except KeyboardInterrupt:
                pytest.fail("a Ctrl-C escaped main() as a traceback")
        monkeypatch.setattr(sys, "stdout", sys.__stdout__)
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return status, out.read_text(), err.read_text()

    return call


def one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def pip_works(env_dir: Path) -> bool:
    probe = [str(env_dir / "bin" / "python"), "-m", "pip", "--version"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def test_a_venv_interrupted_while_made_is_repaired_by_the_next_run(
    engine: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_dir = tmp_path / "env"
    status, _, err = engine("torchao", "--venv", str(env_dir), builder=stub_builder(True))
    assert status == 130
    assert "interrupted" in one_line(err)
    assert (env_dir / "bin" / "python").exists()
    assert not pip_works(env_dir)

    monkeypatch.setenv("FAKE_PIP_STATUS", "1")  # stop at the first install: torch
    status, out, err = engine("torchao", "--venv", str(env_dir))
    assert pip_works(env_dir)
    assert "rebuilding" in out
    assert (tmp_path / "pip.log").read_text().split()[-1] == "torch==2.13.0"
    assert status == 1
    assert "torch==2.13.0 exited 1" in one_line(err)


def test_a_pip_failure_is_one_line(
    engine: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PIP_STATUS", "7")
    status, _, err = engine("quark", "--venv", str(tmp_path / "env"))
    assert status == 1
    line = one_line(err)
    assert "pip install" in line
    assert "exited 7" in line


def test_torch_that_does_not_import_is_one_line(
    engine: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    """pip succeeded (the stub installs nothing), yet torch does not import."""
    status, _, err = engine("torchao", "--venv", str(tmp_path / "env"))
    assert status == 1
    assert "torch does not import" in one_line(err)


@pytest.mark.parametrize("pin", ["2.13; rm -rf x", ">=2", "latest", ""])
def test_a_bad_torch_pin_is_refused_before_anything_is_made(
    engine: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pin: str,
) -> None:
    monkeypatch.setenv("QHARNESS_TORCH_VERSION", pin)
    status, _, err = engine("torchao", "--venv", str(tmp_path / "env"))
    assert status == 2
    assert "QHARNESS_TORCH_VERSION" in one_line(err)
    assert not (tmp_path / "env").exists()


@pytest.mark.parametrize("pin", ["2.13.0", "2.13.0+cpu", "2.14.0.dev20260101", "2.13.0rc1"])
def test_torch_versions_are_accepted(monkeypatch: pytest.MonkeyPatch, pin: str) -> None:
    monkeypatch.setenv("QHARNESS_TORCH_VERSION", pin)
    assert load_engine().torch_version() == pin


def test_a_folder_that_is_not_a_venv_is_refused_not_cleared(
    engine: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    status, _, err = engine("torchao", "--venv", str(folder))
    assert status == 2
    assert "is not a venv" in one_line(err)
    assert (folder / "notes.txt").read_text() == "keep me"


def test_a_read_only_location_is_exit_4(
    engine: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    """A real read-only file system (a tmpfs remounted read-only: root writes through
    permission bits, so chmod would prove nothing)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(ro)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {mounted.stderr}")
    try:
        status, _, err = engine("torchao", "--venv", str(ro / "env"))
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=False)
    assert status == 4
    line = one_line(err)
    assert str(ro / "env") in line
    assert "read-only file system" in line


# ------------------------------------------------ a stage run leaves a run directory
STAGE_TESTS = """
def test_good():
    assert 1 + 1 == 2

def test_bad():
    assert 1 + 1 == 3, "wrong on purpose"
"""


def _stage_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    module = load_engine()
    tests = tmp_path / "stage_tests" / "test_stage.py"
    tests.parent.mkdir(exist_ok=True)
    tests.write_text(STAGE_TESTS)
    results = tmp_path / "reports" / "engine-fake.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)]
    status = module.run_once(Path(sys.executable), cmd, results, dict(os.environ), {})
    return status, capsys.readouterr().out, results


def test_a_stage_run_writes_a_run_directory_and_prints_a_short_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, results = _stage_run(tmp_path, capsys)
    rundir = results.with_suffix("")
    assert status == 1
    for name in ("results.json", "junit.xml", "pytest.log", "summary.md", "report.html"):
        assert (rundir / name).is_file(), name
    assert results.read_bytes() == (rundir / "results.json").read_bytes()
    printed = out.splitlines()
    assert any(line.strip().startswith("FAILED") and "test_bad" in line for line in printed)
    assert any("1 failed, 1 passed" in line for line in printed), out
    assert not any(line.startswith(".F") or line.startswith("F.") for line in printed), out
    assert len(printed) <= 6, out  # the command, the failure, the closing line, where


def test_a_second_stage_run_replaces_the_first_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, results = _stage_run(tmp_path, capsys)
    rundir = results.with_suffix("")
    stale = rundir / "repro" / "old.safetensors"
    stale.parent.mkdir(exist_ok=True)
    stale.write_text("from the last run")
    _stage_run(tmp_path, capsys)
    assert not stale.exists()
    assert (rundir / "summary.md").is_file()


def test_a_directory_the_stage_did_not_make_is_refused_not_emptied(tmp_path: Path) -> None:
    module = load_engine()
    theirs = tmp_path / "reports" / "engine-fake"
    theirs.mkdir(parents=True)
    (theirs / "notes.txt").write_text("mine")
    with pytest.raises(module.EngineError, match="not an engine stage's run directory"):
        module.fresh_run_directory(theirs)
    assert (theirs / "notes.txt").read_text() == "mine"
