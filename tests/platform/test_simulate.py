"""The simulated platform: one clear value or a usage error, its own key, its own rows.

A simulated gfx942 must never be mistaken for (or merged with) a real gfx942 or for the CPU
it runs on; a bad ``QHARNESS_SIMULATE`` / ``--simulate`` is a usage error, never ignored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.errors import EXIT_USAGE, EnvironmentValueError
from harness.platform import capabilities, simulate
from harness.platform.info import FNUZ_ARCHS, detect, platform_key
from harness.report.reading.rundir import new_run_id
from harness.report.reading.rundir import platform_key as results_platform_key
from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_FP8 = {"gfx942": "e4m3fnuz", "gfx950": "e4m3fn", "sm_90": "e4m3fn"}
REAL_KEYS = {"cpu", "cpu+onednn", *FNUZ_ARCHS, "gfx950", "sm_89", "sm_90", "sm_100"}


@pytest.fixture
def triton_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing checks that triton imports; these tests are about the parsing itself."""
    real = simulate.importlib.util.find_spec
    monkeypatch.setattr(
        simulate.importlib.util,
        "find_spec",
        lambda name: object() if name == "triton" else real(name),
    )


@pytest.fixture
def fresh_detect() -> Iterator[None]:
    detect.cache_clear()
    yield
    detect.cache_clear()


@pytest.mark.parametrize("arch", sorted(simulate.SIMULATED_ARCHS))
def test_simulated_platform_names_its_arch_and_keeps_its_own_key(
    arch: str, triton_importable: None, fresh_detect: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(simulate.SIMULATE_VARIABLE, f"triton-interpret:{arch}")
    info = detect()
    assert (info.simulated, info.arch, info.device) == ("triton-interpret", arch, "cpu")
    assert str(info.torch_device) == "cpu"
    assert not info.is_cuda_alike
    assert info.fp8_format == EXPECTED_FP8[arch]
    key = platform_key(info)
    assert key == f"triton-interpret-{arch}"
    assert key not in REAL_KEYS
    doc = info.to_json()
    assert doc["simulated"] == "triton-interpret"
    assert doc["platform_key"] == key
    assert doc["fp8_dtype"] == f"float8_{EXPECTED_FP8[arch]}"
    # results files, run ids and reports read the same key back from the JSON
    assert results_platform_key(doc) == key
    assert f"-{key}-" in new_run_id(doc)
    assert capabilities.expected(info), f"no capability expectations for simulated {arch}"


def test_real_platform_keys_are_unchanged(
    fresh_detect: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(simulate.SIMULATE_VARIABLE, raising=False)
    info = detect()
    assert info.simulated is None
    assert platform_key(info) == "cpu"
    assert results_platform_key({"device": "rocm", "arch": "gfx942"}) == "gfx942"
    assert results_platform_key({"device": "rocm", "arch": "gfx942", "simulated": None}) == "gfx942"


def test_environment_turns_on_the_interpreter(triton_importable: None) -> None:
    env = simulate.simulation_environment(simulate.parse_simulation("triton-interpret:gfx950"))
    assert env == {"QHARNESS_SIMULATE": "triton-interpret:gfx950", "TRITON_INTERPRET": "1"}


@pytest.mark.parametrize(
    "value", ["triton-interpret", "triton-interpret:gfx90a", "cuda-sim:gfx942", "gfx942", ":"]
)
def test_bad_values_are_usage_errors(value: str, triton_importable: None) -> None:
    with pytest.raises(EnvironmentValueError, match="expected one of") as info:
        simulate.parse_simulation(value)
    assert info.value.exit_code == EXIT_USAGE


def test_missing_triton_is_a_usage_error_that_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(simulate.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EnvironmentValueError, match="pip install triton"):
        simulate.parse_simulation("triton-interpret:gfx942")


@pytest.mark.parametrize("argv", [["platform", "--simulate", "nope"], ["run", "--simulate", "x:y"]])
def test_cli_refuses_a_bad_simulate_option(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USAGE
    assert "--simulate=" in capsys.readouterr().err


def test_cli_refuses_a_bad_simulate_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(simulate.SIMULATE_VARIABLE, "triton-interpret:gfx1100")
    assert main(["platform", "--json"]) == EXIT_USAGE
    assert "QHARNESS_SIMULATE=" in capsys.readouterr().err


def test_triton_probes_are_unavailable_off_simulation_with_the_reason(
    fresh_detect: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(simulate.SIMULATE_VARIABLE, raising=False)
    for name in ("triton.dot.e4m3fn", "triton.dot.e4m3fnuz", "triton.dot_scaled.e2m1"):
        with pytest.raises(RuntimeError, match="only under QHARNESS_SIMULATE"):
            capabilities.PROBES[name](detect().torch_device)


@pytest.mark.parametrize("arch", sorted(simulate.SIMULATED_ARCHS))
def test_every_simulated_arch_has_its_expected_interpreter_ops(arch: str) -> None:
    """Run for real where triton is installed (the engine venvs): `platform --simulate` in a
    child finds every expected capability of the arch's row, and the FP8 flavour."""
    pytest.importorskip("triton", reason="triton is not installed here (engine venvs have it)")
    env = {
        k: v for k, v in os.environ.items() if k not in ("QHARNESS_SIMULATE", "TRITON_INTERPRET")
    }
    simulate_arch = ["--simulate", f"triton-interpret:{arch}"]
    out = subprocess.run(
        [sys.executable, "-m", "harness", "platform", "--json", *simulate_arch],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S, check=True,
    ).stdout  # fmt: skip
    report = json.loads(out)
    assert report["platform"]["platform_key"] == f"triton-interpret-{arch}"
    assert report["platform"]["fp8_format"] == EXPECTED_FP8[arch]
    assert report["expected_row"] == f"triton-interpret-{arch}"
    assert report["expected_missing"] == []


# ------------------------------------------------------------------ torch:<arch> (no triton)
@pytest.fixture
def triton_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch simulation must not need triton: parsing sees none installed."""
    real = simulate.importlib.util.find_spec
    monkeypatch.setattr(
        simulate.importlib.util,
        "find_spec",
        lambda name: None if name == "triton" else real(name),
    )


@pytest.mark.parametrize("arch", sorted(simulate.SIMULATED_ARCHS))
def test_torch_simulation_runs_as_the_arch_without_triton(
    arch: str, triton_absent: None, fresh_detect: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.core.schemes import SCHEMES
    from harness.linear.paths.native import NativeScaledMMPath
    from harness.paths.base import LinearProblem

    monkeypatch.setenv(simulate.SIMULATE_VARIABLE, f"torch:{arch}")
    info = detect()
    assert (info.simulated, info.arch, info.device) == ("torch", arch, "cpu")
    assert not info.is_cuda_alike
    assert info.fp8_format == EXPECTED_FP8[arch]
    key = platform_key(info)
    assert key == f"torch-{arch}"
    assert key not in REAL_KEYS
    assert results_platform_key(info.to_json()) == key
    # torch's kernels stand for the arch's: the native path reads the arch's own row
    from harness.platform.info import native_dispatch_key

    assert native_dispatch_key(info) == arch
    scheme = SCHEMES["fp8_per_tensor_fnuz" if arch in FNUZ_ARCHS else "fp8_per_tensor"]
    mode, reason = NativeScaledMMPath().mode_for(scheme, info)
    assert mode is not None, reason  # the arch's row sends its own FP8 flavour to a kernel
    problem = LinearProblem(m=8, n=128, k=128, bias=False, out_dtype=torch.bfloat16)
    support = NativeScaledMMPath().supports(scheme, problem, info)
    assert "simulated platform" not in (support.reason or "")  # a probe may say no, not this


def test_torch_simulation_sets_no_interpreter() -> None:
    env = simulate.simulation_environment(simulate.parse_simulation("torch:gfx942"))
    assert env == {"QHARNESS_SIMULATE": "torch:gfx942"}


@pytest.mark.parametrize(
    ("value", "words"),
    [("cuda-sim:gfx942", "unknown simulation kind 'cuda-sim'"), ("torch:gfx90a", "unknown arch")],
)
def test_bad_kind_or_arch_is_named(value: str, words: str) -> None:
    with pytest.raises(EnvironmentValueError, match=words) as info:
        simulate.parse_simulation(value)
    assert info.value.exit_code == EXIT_USAGE
    assert "torch:gfx942" in str(info.value)  # says what is accepted
