"""``run --workers auto`` on a GPU runner: one worker per visible GPU, each pinned to its own
(not one per CPU core, all on GPU 0); the example workflows say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import harness.cli as cli
import harness.platform.workers as workers
from harness.platform.workers import plan_workers
from tests.conftest import REPO_ROOT


def _run_with_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: int) -> dict[str, Any]:
    """`harness run` with ``gpus`` visible GPUs (faked) and pytest replaced by a recorder."""
    seen: dict[str, Any] = {}

    def fake_pytest(cmd: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> int:
        seen.setdefault("cmd", cmd)
        seen.setdefault("env", dict(extra_env or {}))
        return 5  # no tests ran: nothing else of the run happens

    monkeypatch.setattr(workers, "visible_gpu_count", lambda: gpus)
    monkeypatch.setattr("harness.cli.run.run_pytest", fake_pytest)
    for name in ("QHARNESS_GPUS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    cli.main(["run", "--reports-dir", str(tmp_path / "reports")])
    return seen


def _n(cmd: list[str]) -> str:
    return cmd[cmd.index("-n") + 1]


def test_auto_on_a_gpu_runner_is_one_pinned_worker_per_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _run_with_gpus(tmp_path, monkeypatch, gpus=4)
    assert _n(seen["cmd"]) == "4"
    assert seen["env"]["QHARNESS_GPUS"] == "0,1,2,3"


def test_auto_on_a_cpu_is_xdist_auto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _run_with_gpus(tmp_path, monkeypatch, gpus=0)
    assert _n(seen["cmd"]) == "auto"
    assert "QHARNESS_GPUS" not in seen["env"]


def test_plan_pins_the_parents_visible_gpus_not_0_to_n() -> None:
    plan = plan_workers("auto", {"CUDA_VISIBLE_DEVICES": "2,5"}, gpu_count=2)
    assert (plan.workers, plan.environment) == ("2", {"QHARNESS_GPUS": "2,5"})


def test_plan_keeps_an_explicit_count_and_an_explicit_gpu_list() -> None:
    assert plan_workers("3", {}, gpu_count=8).workers == "3"
    listed = plan_workers("auto", {"QHARNESS_GPUS": "1,3"}, gpu_count=8)
    assert (listed.workers, listed.environment) == ("2", {})


@pytest.mark.parametrize("name", ["nightly-rocm.yml", "nightly-cuda.yml"])
def test_examples_show_one_worker_per_gpu(name: str) -> None:
    text = (REPO_ROOT / "examples" / name).read_text()
    assert yaml.safe_load(text)["env"]["QH_WORKERS"] == "auto"
    (line,) = [ln for ln in text.splitlines() if ln.strip().startswith("QH_WORKERS:")]
    assert "one per visible GPU" in line
    assert "pinned" in line
