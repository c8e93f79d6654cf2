"""`golden check|refresh` recompute with torch's CPU kernels pinned to AVX2.

torch's randn, linspace and pow differ in the last float32 bit between its ISA builds, so
a seeded input rounded to bf16 can flip in a rare element: a golden made on an AVX-512
machine once read as stale on an AVX2 one. These tests check the pinning logic; the
committed store's own check (selftest) shows it holds.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.cli import golden as golden_cli


@pytest.mark.parametrize("capability", ["AVX2", "AVX512"])
def test_x86_cpus_with_avx2_recompute_with_the_avx2_kernels(
    capability: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(golden_cli.CAPABILITY_ENV, raising=False)
    monkeypatch.setattr(golden_cli.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    env = golden_cli.pinned_kernels_env()
    assert env is not None
    assert env[golden_cli.CAPABILITY_ENV] == "avx2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"


def test_no_child_where_already_pinned_or_not_possible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(golden_cli.CAPABILITY_ENV, "avx2")
    assert golden_cli.pinned_kernels_env() is None
    monkeypatch.delenv(golden_cli.CAPABILITY_ENV)
    monkeypatch.setattr(golden_cli.platform, "machine", lambda: "aarch64")
    assert golden_cli.pinned_kernels_env() is None
    monkeypatch.setattr(golden_cli.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    assert golden_cli.pinned_kernels_env() is None


def test_the_command_reruns_itself_pinned_with_every_option(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(
        argv: list[str], env: dict[str, str], **_: Any
    ) -> subprocess.CompletedProcess[str]:
        seen.update(argv=argv, env=env)
        return subprocess.CompletedProcess(argv, 7, "child out\n", "child err\n")

    monkeypatch.setattr(golden_cli, "pinned_kernels_env", lambda: {"ATEN_CPU_CAPABILITY": "avx2"})
    monkeypatch.setattr(golden_cli.subprocess, "run", fake_run)
    args = argparse.Namespace(
        action="refresh", root="/some/store", only="linear/*", no_recompute=False
    )
    assert golden_cli.cmd_golden(args) == 7, "the child's exit status is the command's"
    assert seen["argv"][-6:] == [
        "golden", "refresh", "--root", "/some/store", "--only", "linear/*",
    ]  # fmt: skip
    assert seen["env"] == {"ATEN_CPU_CAPABILITY": "avx2"}
    out = capsys.readouterr()
    assert (out.out, out.err) == ("child out\n", "child err\n"), "the child's output is relayed"
    seen.clear()  # an integrity-only check recomputes nothing: no child
    args = argparse.Namespace(action="check", root=str(tmp_path), only=None, no_recompute=True)
    golden_cli.cmd_golden(args)
    assert seen == {}
