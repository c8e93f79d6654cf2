"""A path registered by another installed package is picked up and parametrized like ours.

The test installs a tiny distribution into a temporary directory (a ``*.dist-info`` with an
``entry_points.txt``), puts it on PYTHONPATH and runs pytest on the linear suite in a
subprocess, exactly as another repository would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core.schemes import SCHEMES
from harness.errors import EXIT_FAILED
from harness.linear.cases import LINEAR_SHAPES, shape_id
from harness.memory.check import MEMORY_SHAPES
from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

BIG = shape_id(max(LINEAR_SHAPES))  # the largest M: every vendor path runs it
ONE = shape_id(next(s for s in LINEAR_SHAPES if s[0] == 1))  # the decode shape, M=1

PATH_MODULE = '''
import torch
from harness.paths.base import Support
from harness.linear.paths.emulated import EmulatedPath


class GoodPath(EmulatedPath):
    """A correct third-party path: the emulated computation under another name."""

    name = "vendor_good"


class DroppedBiasPath(EmulatedPath):
    """A wrong third-party kernel: forgets the bias."""

    name = "vendor_nobias"

    def forward(self, layer, x, out_dtype):
        layer = type(layer)(layer.scheme, layer.weight, layer.input_scale, None)
        return super().forward(layer, x, out_dtype)


class ScaledPath(EmulatedPath):
    """A wrong third-party kernel: every output 1/16 too large."""

    name = "vendor_scaled"

    def forward(self, layer, x, out_dtype):
        return (super().forward(layer, x, out_dtype).float() * 1.0625).to(out_dtype)


class RaisingPath(EmulatedPath):
    name = "vendor_raises"

    def forward(self, layer, x, out_dtype):
        raise RuntimeError("kernel launch failed")


class PickyPath(EmulatedPath):
    name = "vendor_picky"

    def supports(self, scheme, problem, platform):
        return Support.no("vendor_picky: only M >= 16") if problem.m < 16 else Support.yes()
'''


def _install_fake_distribution(root: Path, entry_points: str) -> None:
    (root / "vendor_paths.py").write_text(PATH_MODULE)
    dist = root / "vendor_paths-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-paths\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
    )


@pytest.fixture
def vendor(tmp_path: Path) -> Path:
    _install_fake_distribution(
        tmp_path,
        """
        [qharness.paths]
        good = vendor_paths:GoodPath
        nobias = vendor_paths:DroppedBiasPath
        raises = vendor_paths:RaisingPath
        picky = vendor_paths:PickyPath
        """,
    )
    return tmp_path


def test_external_paths_are_parametrized_like_builtins(vendor: Path) -> None:
    result = _pytest(vendor, "suites/test_linear.py", "--collect-only", "-q")
    assert result.returncode == 0, result.stdout + result.stderr
    ids = result.stdout
    for name in ("vendor_good", "vendor_nobias", "vendor_raises", "vendor_picky", "native"):
        assert f"test_linear[fp8_per_tensor-{name}-{BIG}-bias-bf16]" in ids


def test_external_paths_run_and_wrong_ones_fail_clearly(vendor: Path, tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    result = _pytest(
        vendor,
        "suites/test_linear.py",
        "-k",
        f"vendor and {BIG} and bf16",
        f"--qharness-results={results}",
        "-q",
    )
    out = result.stdout
    assert result.returncode == 1, out
    assert f"test_linear[fp8_per_tensor-vendor_good-{BIG}-bias-bf16] PASSED" not in out
    import json

    records = {
        r["nodeid"].split("[")[1].rstrip("]"): r for r in json.loads(results.read_text())["records"]
    }
    assert records[f"fp8_per_tensor-vendor_good-{BIG}-bias-bf16"]["outcome"] == "passed"
    assert records[f"fp8_per_tensor-vendor_good-{BIG}-nobias-bf16"]["outcome"] == "passed"
    # A dropped bias is caught against the golden reference ...
    dropped = records[f"fp8_per_tensor-vendor_nobias-{BIG}-bias-bf16"]
    assert dropped["outcome"] == "failed"
    assert "vs golden reference" in dropped["reason"]
    # ... and is harmless (so it passes) when the layer has no bias.
    assert records[f"fp8_per_tensor-vendor_nobias-{BIG}-nobias-bf16"]["outcome"] == "passed"
    raised = records[f"fp8_per_tensor-vendor_raises-{BIG}-bias-bf16"]
    assert raised["outcome"] == "failed"
    assert "path 'vendor_raises' raised" in raised["reason"]
    assert "kernel launch failed" in raised["reason"]
    picky = records[f"fp8_per_tensor-vendor_picky-{BIG}-bias-bf16"]
    assert picky["outcome"] == "passed"


def test_unsupported_external_case_is_a_counted_skip_with_its_reason(
    vendor: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results.json"
    result = _pytest(
        vendor,
        "suites/test_linear.py",
        "-k",
        f"vendor_picky and {ONE}",
        f"--qharness-results={results}",
        "-q",
    )
    assert result.returncode == 0, result.stdout
    assert "qharness: skips by reason" in result.stdout
    assert "vendor_picky: only M >= 16" in result.stdout
    import json

    summary = json.loads(results.read_text())["summary"]
    # every scheme x (bias, no bias) x (bf16, fp16, fp32) at M=1, and every scheme x
    # (bf16, fp16, fp32) of test_linear_operands (it shows emulated's operands, inherited
    # with emulated's forward)
    picky = len(SCHEMES) * 2 * 3 + len(SCHEMES) * 3
    assert summary["skip_reasons"] == {"vendor_picky: only M >= 16": picky}


def test_a_broken_entry_point_is_one_clear_error(tmp_path: Path) -> None:
    _install_fake_distribution(
        tmp_path,
        """
        [qharness.paths]
        broken = vendor_paths:DoesNotExist
        """,
    )
    result = _pytest(tmp_path, "suites/test_linear.py", "--collect-only", "-q")
    assert result.returncode != 0
    assert "entry point 'broken'" in result.stdout + result.stderr
    assert "qharness.paths" in result.stdout + result.stderr


# ------------------------------------------------- docs/PATHS.md's first path, as written
PATHS_DOC = REPO_ROOT / "docs" / "PATHS.md"


def _doc_block(marker: str) -> str:
    """The fenced block of docs/PATHS.md whose first line is ``marker``."""
    blocks = re.findall(r"```(?:python|toml)\n(.*?)```", PATHS_DOC.read_text(), re.S)
    found = [b for b in blocks if b.startswith(marker)]
    assert len(found) == 1, f"docs/PATHS.md: one block starting {marker!r}, found {len(found)}"
    return found[0]


def _install_doc_example(site: Path, source: str) -> None:
    """The docs' package, and its entry point exactly as the docs' pyproject.toml says."""
    package = site / "my_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "qharness_paths.py").write_text(source)
    toml = _doc_block("# your pyproject.toml")
    entry = re.search(r'^(\w+) = "([\w.:]+)"', toml, re.M)
    assert entry, toml
    dist = site / "my_package-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[qharness.paths]\n{entry[1]} = {entry[2]}\n")


def _run_from_project(tmp_path: Path, source: str, keyword: str) -> tuple[int, str, dict]:
    """`python -m harness run -k KEYWORD` from a project directory of its own."""
    site, project = tmp_path / "site", tmp_path / "project"
    _install_doc_example(site, source)
    project.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    reports = project / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--workers", "0", "--reports-dir",
         str(reports), "-k", keyword],
        cwd=project, capture_output=True, text=True, env=env,
    )  # fmt: skip
    output = done.stdout + done.stderr
    results = reports / "latest" / "results.json"
    doc = json.loads(results.read_text()) if results.is_file() else {}
    return done.returncode, output, doc


def test_the_docs_first_path_passes_as_written(tmp_path: Path) -> None:
    """The numerics-first example: its numbers pass, its memory is a counted, reasoned
    skip (never a pass), and nothing fails."""
    source = _doc_block("# my_package/qharness_paths.py")
    keyword = "mykernel and (memory or 8x128x256)"
    status, output, doc = _run_from_project(tmp_path, source, keyword)
    assert status == 0, output[-4000:]
    records = doc["records"]
    by_outcome: dict[str, list[dict]] = {}
    for r in records:
        by_outcome.setdefault(r["outcome"], []).append(r)
    assert "failed" not in by_outcome, [r["nodeid"] for r in by_outcome["failed"]]
    passed = {r["nodeid"].split("[")[0].split("::")[-1] for r in by_outcome.get("passed", [])}
    assert "test_linear" in passed, passed
    memory = [r for r in records if "test_forward_memory" in r["nodeid"]]
    fp8 = [r for r in memory if "[fp8_per_tensor-" in r["nodeid"]]
    assert len(fp8) == len(MEMORY_SHAPES), [r["nodeid"] for r in memory]
    reason = (
        "memory not judged for path 'mykernel': "
        "mykernel dequantizes the weight in forward (numerics first)"
    )
    assert all(r["outcome"] == "skipped" for r in fp8), fp8
    assert doc["summary"]["skip_reasons"][reason] == len(MEMORY_SHAPES)
    assert reason in output  # the run's own "skips by reason"


def test_the_docs_first_path_without_its_declaration_fails_memory_and_says_why(
    tmp_path: Path,
) -> None:
    source = _doc_block("# my_package/qharness_paths.py")
    line = '    memory_not_judged = "mykernel dequantizes the weight in forward (numerics first)"\n'
    assert line in source
    status, output, doc = _run_from_project(
        tmp_path, source.replace(line, ""), "mykernel and memory and fp8_per_tensor"
    )
    assert status == EXIT_FAILED, output[-4000:]
    failed = [r for r in doc["records"] if r["outcome"] == "failed"]
    assert len(failed) == len(MEMORY_SHAPES), [r["nodeid"] for r in doc["records"]]
    assert "memory_not_judged" in output
