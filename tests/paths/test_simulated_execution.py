"""What a test ran on a simulated platform is recorded: interpreted GPU kernel source, CPU
code under the arch's expectations, or nothing (harness.paths.execution).

A plain-torch plugin path runs on the CPU under ``triton-interpret:gfx942`` and passes; its
record must say it was CPU code, so that no report reads its pass as the arch's. The run is
a pytest child on the linear suite, as in tests/paths/test_external_path.py, with a stand-in
``triton`` package (parsing the simulation only checks that triton imports; no kernel here
needs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.paths.base import PathBase, runs_kernel_source
from harness.paths.execution import execution_of
from harness.platform.info import PlatformInfo
from harness.platform.simulate import CPU_CODE, INTERPRETED, SIMULATE_VARIABLE
from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

PATH_MODULE = '''
from harness.paths.base import Support
from harness.linear.paths.emulated import EmulatedPath


class TorchPath(EmulatedPath):
    """A plain-torch plugin: the emulated computation under another name."""

    name = "vendor_torch"


class KernelSourcePath(EmulatedPath):
    """A plugin that says it calls GPU kernel source (as the Triton adapters do)."""

    name = "vendor_kernel"
    runs_kernel_source = True


class UnsupportedPath(EmulatedPath):
    name = "vendor_unsupported"

    def supports(self, scheme, problem, platform):
        return Support.no("vendor_unsupported: no kernel for this scheme")
'''
SELECTION = "test_linear[ and fp8_per_tensor- and vendor_ and -37x16x128-bias-bf16"


def _install(root: Path) -> None:
    (root / "vendor_exec.py").write_text(PATH_MODULE)
    (root / "stand-in" / "triton").mkdir(parents=True)  # see the module doc
    (root / "stand-in" / "triton" / "__init__.py").write_text("")
    dist = root / "vendor_exec-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-exec\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """
            [qharness.paths]
            torch = vendor_exec:TorchPath
            kernel = vendor_exec:KernelSourcePath
            unsupported = vendor_exec:UnsupportedPath
            """
        )
    )


def _records(root: Path, simulate: str | None) -> dict[str, dict[str, Any]]:
    results = root / f"results-{simulate is not None}.json"
    env = {k: v for k, v in os.environ.items() if k != SIMULATE_VARIABLE}
    env["PYTHONPATH"] = f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    if simulate is not None:  # only there: elsewhere the harness would call it as triton
        env[SIMULATE_VARIABLE] = simulate
        env["PYTHONPATH"] = f"{root / 'stand-in'}{os.pathsep}{env['PYTHONPATH']}"
    pytest_args = ["-p", "no:cacheprovider", "-n", "0", "-q", "suites/test_linear.py"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *pytest_args,
            "-k",
            SELECTION,
            f"--qharness-results={results}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads(results.read_text())["records"]
    return {r["path"]: r for r in records}


def test_a_simulated_run_records_what_each_path_ran(tmp_path: Path) -> None:
    _install(tmp_path)
    records = _records(tmp_path, "triton-interpret:gfx942")
    assert {p: (r["outcome"], r.get("execution")) for p, r in records.items()} == {
        "vendor_torch": ("passed", "cpu-code"),
        "vendor_kernel": ("passed", "interpreted-kernel"),
        "vendor_unsupported": ("skipped", "not-run"),
    }


def test_a_run_on_real_hardware_records_no_execution(tmp_path: Path) -> None:
    _install(tmp_path)
    records = _records(tmp_path, None)
    assert set(records) == {"vendor_torch", "vendor_kernel", "vendor_unsupported"}
    assert all("execution" not in r for r in records.values()), records


SIMULATED = PlatformInfo(
    "cpu", "gfx942", "simulated gfx942", "2", None, None, simulated="triton-interpret"
)
REAL = PlatformInfo("cpu", "x86_64", "x86_64", "2", None, None)


class _Bare:
    """A plugin that inherits nothing: it declares no ``runs_kernel_source``."""

    name = "bare"


class _Kernel(PathBase):
    name = "kernel"
    runs_kernel_source = True


@pytest.mark.parametrize(
    ("path", "platform", "expected"),
    [
        (_Bare(), SIMULATED, CPU_CODE),
        (PathBase(), SIMULATED, CPU_CODE),
        (_Kernel(), SIMULATED, INTERPRETED),
        (_Kernel(), REAL, None),
        (_Bare(), REAL, None),
    ],
)
def test_execution_of_reads_the_declaration(
    path: object, platform: PlatformInfo, expected: str | None
) -> None:
    assert execution_of(path, platform) == expected


ADAPTER_TRITON_PATHS = [
    ("aiter", "qharness_aiter.linear", "AiterLinearPath"),
    ("aiter", "qharness_aiter.moe", "AiterFusedMoEPath"),
    ("aiter", "qharness_aiter.moe_mxfp4", "AiterFusedMoEMXFP4Path"),
    ("vllm", "qharness_vllm.triton_linear", "VllmTritonScaledMMPath"),
    ("vllm", "qharness_vllm.triton_linear", "VllmTritonBlockFp8Path"),
    ("vllm", "qharness_vllm.triton_moe", "VllmTritonFusedMoEPath"),
]


@pytest.mark.parametrize(("adapter", "module", "cls"), ADAPTER_TRITON_PATHS)
def test_the_triton_adapters_declare_kernel_source(
    adapter: str, module: str, cls: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their modules import without the engine; the engine is needed only to run them."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO_ROOT / "integrations" / adapter))
    path_class = getattr(importlib.import_module(module), cls)
    assert runs_kernel_source(path_class)


def test_a_case_path_is_looked_up_in_its_suites_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """MoE cases name MoE paths; every other suite's cases name linear paths."""
    import harness.moe.paths as moe_paths
    from harness.pytest_plugin.execution import case_execution, ran

    def only_moe(name: str) -> object:
        if name != "moe_only":
            raise KeyError(name)
        return _Kernel()

    monkeypatch.setattr(moe_paths, "get_moe_path", only_moe)
    assert case_execution({"suite": "moe", "path": "moe_only"}, SIMULATED) == INTERPRETED
    assert case_execution({"suite": "linear", "path": "moe_only"}, SIMULATED) is None
    assert case_execution({"suite": "linear", "path": "emulated"}, SIMULATED) == CPU_CODE
    assert case_execution({"suite": "quantize", "scheme": "fp8_per_tensor"}, SIMULATED) is None
    assert case_execution({"suite": "linear", "path": "emulated"}, REAL) is None
    assert ran(CPU_CODE, "skipped") == "not-run"
    assert ran(INTERPRETED, "failed") == INTERPRETED
    assert ran(None, "skipped") is None
