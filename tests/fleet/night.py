"""Fabricated fleet runs: results documents for CUDA-like and ROCm-like runners, each checked
against the results schema (`results_problem`) before it is written into a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.report.reading.results import SCHEMA, results_problem, summarize

PLATFORMS: dict[str, dict[str, Any]] = {
    "gfx942": {"device": "rocm", "arch": "gfx942", "name": "AMD Instinct MI300X",
               "torch_version": "2.7.0+rocm6.3", "cuda_version": None, "hip_version": "6.3",
               "is_cuda_alike": True, "fp8_format": "e4m3fnuz",
               "fp8_dtype": "float8_e4m3fnuz"},
    "sm_90": {"device": "cuda", "arch": "sm_90", "name": "NVIDIA H100",
              "torch_version": "2.7.0+cu128", "cuda_version": "12.8", "hip_version": None,
              "is_cuda_alike": True, "fp8_format": "e4m3fn", "fp8_dtype": "float8_e4m3fn"},
}  # fmt: skip


def record(
    scheme: str, path: str, outcome: str = "passed", sqnr: float = 30.0, suite: str = "linear"
) -> dict[str, Any]:
    return {
        "nodeid": f"suites/test_{suite}.py::test_{suite}[{scheme}-{path}-1x16x256-bf16]",
        "suite": suite,
        "scheme": scheme,
        "path": path,
        "shape": "1x16x256",
        "outcome": outcome,
        "reason": "boom" if outcome == "failed" else None,
        "duration_s": 0.01,
        "metrics": {"sqnr_db": sqnr} if outcome in ("passed", "failed") else {},
    }


def results_doc(
    arch: str,
    created: str,
    records: list[dict[str, Any]],
    label: str | None = None,
    host: str = "a1b2",
    **extra: Any,
) -> dict[str, Any]:
    platform = PLATFORMS[arch]
    key = f"{arch}@{label}" if label else arch
    doc = {
        "schema": SCHEMA,
        "created": created,
        "exitstatus": 1 if any(r["outcome"] == "failed" for r in records) else 0,
        "partial": False,
        "platform": platform,
        "versions": {"qharness": "0.1.0", "torch": platform["torch_version"]},
        "runner": {"label": label, "key": key, "torch": platform["torch_version"],
                   "cuda": platform["cuda_version"], "hip": platform["hip_version"],
                   "driver": None, "host": host},
        "summary": summarize(records),
        "records": records,
        **extra,
    }  # fmt: skip
    problem = results_problem(doc)
    assert problem is None, problem
    return doc


def write_run(reports: Path, run_id: str, doc: dict[str, Any]) -> Path:
    run = reports / run_id
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(doc, indent=1))
    return run
