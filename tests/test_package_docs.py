"""Each harness package's docstring lists its modules, and only modules that exist.

docs/ARCHITECTURE.md stays one page by leaving the module tables to the packages: the
``Modules`` list of each ``harness/<pkg>/__init__.py``, and of each floor of the report
(``harness/report/reading/__init__.py``), names every module and subpackage beside it
(``- ``name``: its one job``). A module added without a line, or a line left for a module
that moved, fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
# the rooms, and the report's floors (tests/test_layering.py ``FLOORS``)
PACKAGES = sorted(
    p.parent for p in [*HARNESS.glob("*/__init__.py"), *HARNESS.glob("report/*/__init__.py")]
)


def members(package: Path) -> set[str]:
    """The modules and subpackages beside ``package/__init__.py``."""
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    return modules | {f"{p.parent.name}/" for p in package.glob("*/__init__.py")}


def listed(docstring: str) -> set[str]:
    """The names the ``Modules`` list gives, before any "(with ...)" of other packages."""
    section = docstring.split("Modules, each with its one job:", 1)
    assert len(section) == 2, "no 'Modules, each with its one job:' list"
    entries = re.split(r"^- ", section[1], flags=re.MULTILINE)[1:]
    labels = [entry.split(": ", 1)[0].split("(")[0] for entry in entries]
    return {name for label in labels for name in re.findall(r"``([\w/]+)``", label)}


def test_packages_were_found() -> None:
    assert {p.name for p in PACKAGES} >= {"core", "store", "report", "cli", "paths"}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_package_docstring_lists_its_modules(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    names = listed(docstring)
    assert sorted(members(package) - names) == [], "modules missing from the docstring"
    assert sorted(names - members(package)) == [], "docstring lists modules that do not exist"


def test_listed_reads_labels_only() -> None:
    doc = (
        "x\n\nModules, each with its one job:\n\n"
        "- ``a``, ``b`` (with ``other.c``): uses ``d``.\n"
        "- ``e/``: more.\n  - ``f``: not an entry"
    )
    assert listed(doc) == {"a", "b", "e/"}
