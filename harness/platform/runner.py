"""Which runner produced a run: a label, and the software stack under the platform.

A platform key (``gfx942``) names an architecture, not a machine: two gfx942 runners, or one
with ROCm 6.2 and one with 6.3, would share it and become each other's baselines. The
runner's identity adds a label (``run --runner-label`` or ``QHARNESS_RUNNER``) and the
versions that change numerics (torch, HIP/CUDA, the kernel driver). Reports and baselines
are keyed by `runner_key`: the platform key, plus ``@label`` when a label is given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import EnvironmentValueError

RUNNER_VARIABLE = "QHARNESS_RUNNER"
LABEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# Where each kernel driver states its version (read, never executed): NVIDIA's proc file
# ("NVRM version: ... Kernel Module  550.54.14 ..."), amdgpu's module version.
DRIVER_FILES: tuple[tuple[str, Path, re.Pattern[str]], ...] = (
    ("nvidia", Path("/proc/driver/nvidia/version"), re.compile(r"Kernel Module\s+(\S+)")),
    ("amdgpu", Path("/sys/module/amdgpu/version"), re.compile(r"(\S+)")),
)


def check_label(label: str, origin: str) -> str:
    """A runner label: letters, digits, ``.``, ``_``, ``-``; at most 64 characters."""
    if not LABEL_PATTERN.fullmatch(label):
        raise EnvironmentValueError(
            f"{origin}={label!r}: a runner label is 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (e.g. mi300x-rack2)"
        )
    return label


def runner_label(environ: Mapping[str, str]) -> str | None:
    """``QHARNESS_RUNNER``, validated; None when unset or empty."""
    value = environ.get(RUNNER_VARIABLE, "").strip()
    return check_label(value, RUNNER_VARIABLE) if value else None


def runner_key(platform_key: str, label: str | None) -> str:
    """The report column and baseline key: ``gfx942``, or ``gfx942@mi300x-rack2``."""
    return f"{platform_key}@{label}" if label else platform_key


def driver_version() -> str | None:
    """``nvidia 550.54.14`` / ``amdgpu 6.8.5``, or None where no GPU driver says."""
    for name, path, pattern in DRIVER_FILES:
        try:
            text = path.read_text(errors="replace")[:4096]
        except OSError:
            continue
        found = pattern.search(text)
        if found:
            return f"{name} {found.group(1)}"
    return None


def runner_identity(platform: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``runner`` object of a results file, from the platform's JSON and the environment."""
    device = str(platform.get("device", "unknown"))
    key = "cpu" if device == "cpu" else str(platform.get("arch") or device)
    label = runner_label(environ)
    return {
        "label": label,
        "key": runner_key(key, label),
        "torch": platform.get("torch_version"),
        "cuda": platform.get("cuda_version"),
        "hip": platform.get("hip_version"),
        "driver": driver_version(),
    }
