"""Rules the harness code keeps, checked on its source so a regression fails here.

- No decision by name prefix or suffix (`startswith`/`endswith`): a prefix test once sent
  w_mxfp4_a_mxfp6_* schemes to a kernel that only ran pure w_mxfp4. Use explicit tables.
- No LAPACK-backed ops in references (`torch.linalg`, `svd`, `qr`, `inverse`, ...): a
  reference once needed a CPU LAPACK that the ROCm wheel does not ship.
- No `is_cuda()`-style gating: ROCm must take the same path (`is_cuda_alike`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
SOURCES = sorted(HARNESS.rglob("*.py"))

FORBIDDEN_METHODS = {"startswith", "endswith"}
LAPACK_NAMES = {"linalg", "svd", "qr", "inverse", "pinverse", "cholesky", "lstsq", "eig", "det"}
CUDA_ONLY_NAMES = {"is_cuda"}


def violations(source: str, label: str) -> list[str]:
    """Every rule broken in ``source``, as "label:line: what"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        where = f"{label}:{node.lineno}"
        if node.attr in FORBIDDEN_METHODS:
            found.append(f"{where}: .{node.attr}() decides by name prefix/suffix")
        if node.attr in LAPACK_NAMES and ast.unparse(node.value) == "torch":
            found.append(f"{where}: torch.{node.attr} needs LAPACK")
        if node.attr in CUDA_ONLY_NAMES:
            found.append(f"{where}: .{node.attr} excludes ROCm; use is_cuda_alike")
    return found


def test_sources_were_found() -> None:
    assert len(SOURCES) > 20


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HARNESS.parent)))
def test_harness_source_keeps_the_rules(path: Path) -> None:
    assert violations(path.read_text(), str(path.relative_to(HARNESS.parent))) == []


def test_the_rule_checker_finds_each_kind_of_violation() -> None:
    sample = (
        "import torch\n"
        "if name.startswith('w_mxfp4'):\n    pass\n"
        "torch.linalg.solve(a, b)\n"
        "torch.inverse(a)\n"
        "if t.is_cuda:\n    pass\n"
    )
    text = "\n".join(violations(sample, "sample.py"))
    assert "sample.py:2: .startswith() decides by name prefix/suffix" in text
    assert "sample.py:4: torch.linalg needs LAPACK" in text
    assert "sample.py:5: torch.inverse needs LAPACK" in text
    assert "sample.py:6: .is_cuda excludes ROCm" in text
