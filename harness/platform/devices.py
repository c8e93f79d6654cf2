"""Which GPUs a run may use, from ``QHARNESS_GPUS``, validated before anything uses them.

The value goes into CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES of each pytest-xdist worker;
a value those variables would misread (``abc`` hides every GPU, ``-1`` too) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.errors import EnvironmentValueError

GPU_LIST_VARIABLE = "QHARNESS_GPUS"


def gpu_list_from_environment(environ: Mapping[str, str]) -> list[str]:
    """GPU ordinals from ``QHARNESS_GPUS="0,1,..."`` (empty when unset); `EnvironmentValueError`
    for anything but distinct non-negative integers separated by commas."""
    value = environ.get(GPU_LIST_VARIABLE, "")
    if not value.strip():
        return []
    items = [item.strip() for item in value.split(",")]
    bad = [item for item in items if not (item.isascii() and item.isdigit())]
    if bad or len(set(map(int, items))) != len(items):
        problem = f"{bad[0]!r} is not a GPU ordinal" if bad else "an ordinal is repeated"
        raise EnvironmentValueError(
            f"{GPU_LIST_VARIABLE}={value!r}: {problem}; expected distinct non-negative integers "
            "separated by commas, e.g. QHARNESS_GPUS=0,1,2,3"
        )
    return [str(int(item)) for item in items]
