"""Which GPU each pytest-xdist worker sees (``QHARNESS_GPUS``)."""

from __future__ import annotations

import re
from collections.abc import MutableMapping

GPU_LIST_VARIABLE = "QHARNESS_GPUS"  # parsed by harness.platform.devices
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def pin_worker_gpu(environ: MutableMapping[str, str]) -> str | None:
    """Give xdist worker gwN the N-th (round robin) GPU of ``QHARNESS_GPUS="0,1,..."``.

    Runs in the worker's pytest_configure, before any test touches the device, so each
    worker sees one GPU (CUDA and ROCm read the same ordinal from both variables).
    """
    from harness.platform.devices import gpu_list_from_environment  # torch: import when asked

    gpus = gpu_list_from_environment(environ)  # EnvironmentValueError for abc, -1, ...
    worker = re.fullmatch(r"gw(\d+)", environ.get("PYTEST_XDIST_WORKER", ""))
    if not gpus or worker is None:
        return None
    gpu = gpus[int(worker.group(1)) % len(gpus)]
    for name in VISIBILITY_VARIABLES:
        environ[name] = gpu
    return gpu
