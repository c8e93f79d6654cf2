#!/usr/bin/env python3
"""Create (or update) ./.venv with qharness and its tools installed; idempotent.

- The venv sees system site-packages, so a torch you already have (ROCm or CUDA builds
  included) is used as it is: it is pinned while installing, so pip can never reinstall,
  upgrade or replace it.
- Only when no torch is importable does it run ``pip install torch==<TORCH_VERSION>``.
  Where pip is configured with a local CPU wheel, that is what you get; elsewhere point pip
  at a CPU wheel index first (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL), or install your torch
  first, to avoid a multi-GB CUDA download.
- Then ``pip install -e .[dev]`` (the harness, pytest plugins, ml_dtypes, ruff, mypy).
Standard library only: it runs on a bare Python 3.10+.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("QHARNESS_VENV", ROOT / ".venv"))
TORCH_VERSION = os.environ.get("QHARNESS_TORCH_VERSION", "2.13.0")


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(*cmd: str) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def has_module(python: Path, module: str) -> bool:
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def main() -> int:
    if sys.version_info < (3, 10):  # noqa: UP036 - runs before the package, on any python3
        print(f"qharness needs Python >= 3.10, this is {sys.version.split()[0]}", file=sys.stderr)
        return 1
    if not venv_python().exists():
        print(f"creating {VENV} (with system site-packages, so an installed torch is reused)")
        venv.EnvBuilder(with_pip=True, system_site_packages=True).create(VENV)
    python = str(venv_python())
    pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if has_module(venv_python(), "torch"):
        version = subprocess.run(
            [python, "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"using the installed torch {version}; pinned so pip cannot replace it")
    else:
        run(*pip, f"torch=={TORCH_VERSION}")
        version = TORCH_VERSION
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pin:
        pin.write(f"torch=={version}\n")
    try:
        run(*pip, "-c", pin.name, "-e", f"{ROOT}[dev]")
    finally:
        os.unlink(pin.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
