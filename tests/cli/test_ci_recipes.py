"""The CI recipes in examples/ work: their structure is what docs/CI.md promises, and the
shell steps that call qharness, run here in order on CPU, produce the run directory, the
history, the summary and the gate the workflow relies on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

WORKFLOWS = sorted((REPO_ROOT / "examples").glob("nightly-*.yml"))
SUBSET = "test_linear and fp8_per_tensor and not fnuz and 1x16x256 and bias-bf16"
STEP_OUTPUT = re.compile(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}")


def _steps(workflow: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = yaml.safe_load(workflow.read_text())
    (job,) = doc["jobs"].values()
    return doc, job["steps"]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_has_what_a_nightly_needs(workflow: Path) -> None:
    doc, steps = _steps(workflow)
    (job,) = doc["jobs"].values()
    triggers = doc.get("on") or doc.get(True)  # YAML 1.1 reads a bare `on` as True
    assert triggers["schedule"][0]["cron"]
    assert "pytorch" in job["container"]["image"]
    uses = [s.get("uses", "") for s in steps]
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert "git fetch --depth 1 origin" in scripts  # the history branch (durable, not a cache)
    assert any(u.startswith("actions/upload-artifact") for u in uses)
    scripts = "\n".join(s.get("run", "") for s in steps)
    assert "GITHUB_STEP_SUMMARY" in scripts
    assert "--fail-on-regression" in scripts


def test_workflow_commands_run_here(tmp_path: Path) -> None:
    """The ROCm recipe's qharness steps, in order (the CUDA one differs only in its names)."""
    workflow = REPO_ROOT / "examples" / "nightly-rocm.yml"
    doc, steps = _steps(workflow)
    outputs, summary = tmp_path / "github_output", tmp_path / "step_summary"
    env = {
        **os.environ,
        **{k: str(v) for k, v in doc["env"].items()},
        "QH_BENCH": "",  # benchmarks are exercised by the selftest's benchmark step
        "QH_WORKERS": "0",
        "QH_K": SUBSET,
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # `python`
    }
    values: dict[tuple[str, str], str] = {}
    for step in steps:
        script = step.get("run", "")
        if "python -m harness" not in script and "steps." not in script:
            continue
        script = STEP_OUTPUT.sub(lambda m: values.get((m[1], m[2]), ""), script)
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=HANG_GUARD_S,
        )  # fmt: skip
        assert done.returncode == 0, f"{step['name']}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        if outputs.exists():
            for line in outputs.read_text().splitlines():
                key, _, value = line.partition("=")
                values[(step["id"], key)] = value
            outputs.unlink()
    latest = tmp_path / "reports" / "latest"
    assert (latest / "results.json").is_file()
    assert (latest / "junit.xml").is_file()
    assert (latest / "report.html").is_file()
    assert (tmp_path / "qharness-history").is_dir()
    assert "## qharness nightly" in summary.read_text()
    assert values[("run", "status")] == "0"
    assert values[("report", "status")] == "0"
