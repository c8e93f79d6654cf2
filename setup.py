"""Build hook: the wheel carries the suites, goldens and benchmarks as package data.

The repository keeps them at its top (`suites/`, `golden/`, `benchmarks/`); building a wheel
copies them to ``harness/_shipped/`` so an installed qharness runs them from any directory
(`harness.store.locations` finds either layout). Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = ("suites", "golden", "benchmarks", "conftest.py")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".staging-*")


class BuildWithShippedContent(build_py):
    """build_py, then copy the shipped content under harness/_shipped in the build tree."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads them from the checkout
        target = Path(self.build_lib) / "harness" / "_shipped"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in SHIPPED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, ignore=IGNORED)
            elif source.is_file():
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithShippedContent})
