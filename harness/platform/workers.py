"""How many pytest-xdist workers ``run --workers auto`` starts, and which GPU each one gets.

On a GPU runner the cores are not the resource the suites share: every worker would open a
context on the same device (GPU 0), 128 of them on a large node. So ``auto`` means one
worker per visible GPU there, each pinned to its own GPU through ``QHARNESS_GPUS`` (the
plugin's `pin_worker_gpu` turns it into CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES). On a
CPU machine ``auto`` stays pytest-xdist's own (one worker per core).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.platform.devices import GPU_LIST_VARIABLE, gpu_list_from_environment

# The variables through which the parent may already have narrowed the visible GPUs, in the
# order they are read (ROCm honours HIP_ and CUDA_ alike).
PARENT_VISIBILITY = ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class WorkerPlan:
    """What `run` hands pytest: the ``-n`` value and the environment additions."""

    workers: str  # pytest-xdist's -n: "auto", "0" or a count
    environment: dict[str, str] = field(default_factory=dict)
    explanation: str = ""


def _visible_ordinals(environ: Mapping[str, str], gpu_count: int) -> list[str]:
    """The physical ordinals of the visible GPUs: the parent's visibility list when it is
    one of integers (pinning must name those, not 0..n-1), else 0..gpu_count-1."""
    for name in PARENT_VISIBILITY:
        value = environ.get(name, "").strip()
        if value:
            items = [item.strip() for item in value.split(",")]
            if all(item.isascii() and item.isdigit() for item in items):
                return items[:gpu_count] if gpu_count else items
    return [str(i) for i in range(gpu_count)]


def plan_workers(requested: str, environ: Mapping[str, str], gpu_count: int) -> WorkerPlan:
    """The plan for ``--workers requested`` on a machine with ``gpu_count`` visible GPUs.

    An explicit count is kept as given (pinned round robin if ``QHARNESS_GPUS`` is set).
    ``auto`` with ``QHARNESS_GPUS`` set: one worker per listed GPU. ``auto`` on a GPU
    runner: one worker per visible GPU, pinned. ``auto`` on a CPU: xdist's ``auto``."""
    listed = gpu_list_from_environment(environ)
    if requested != "auto":
        return WorkerPlan(requested)
    if listed:
        return WorkerPlan(
            str(len(listed)), {}, f"one worker per GPU of {GPU_LIST_VARIABLE}={','.join(listed)}"
        )
    if gpu_count <= 0:
        return WorkerPlan("auto", {}, "one worker per CPU core (no GPU visible)")
    ordinals = _visible_ordinals(environ, gpu_count)
    return WorkerPlan(
        str(len(ordinals)),
        {GPU_LIST_VARIABLE: ",".join(ordinals)},
        f"one worker per visible GPU ({', '.join(ordinals)}), each pinned to its own",
    )


def visible_gpu_count() -> int:
    """GPUs torch sees in this process (0 on a CPU machine)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
