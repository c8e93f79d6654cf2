"""Where the shipped suites, goldens and benchmarks live: the checkout, or the installed wheel.

A checkout keeps them at the repository's top (`suites/`, `golden/`, `benchmarks/`); a wheel
carries copies under ``harness/_shipped/`` (mapped in at build time by setup.py). Code asks
here instead of walking up from its own file, so both layouts work.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
CHECKOUT_ROOT = PACKAGE_DIR.parent
SHIPPED_ROOT = PACKAGE_DIR / "_shipped"


def is_checkout() -> bool:
    """True when running from a source checkout (editable install or PYTHONPATH)."""
    return (CHECKOUT_ROOT / "suites").is_dir() and (CHECKOUT_ROOT / "pyproject.toml").is_file()


def content_root() -> Path:
    """The directory holding ``suites/``, ``golden/`` and ``benchmarks/``."""
    return CHECKOUT_ROOT if is_checkout() else SHIPPED_ROOT


def golden_root() -> Path:
    return content_root() / "golden"


def suites_dir() -> Path:
    return content_root() / "suites"


def benchmarks_dir() -> Path:
    return content_root() / "benchmarks"
