"""Harness canaries: the two seed bugs in how peak memory is measured, a platform check
gated on the device kind instead of the arch (caught under ``torch:gfx942``), and a fused
NVFP4 layer served under one shard's global (`harness.loading.fused_nvfp4.NVFP4_FUSERS`).

They live in the harness, not in a plugin, so they are planted as a pytest plugin
(``-p tests.canaries.mutants``, the mutant named by ``QHARNESS_CANARY_MUTANT``) that swaps
one function of `harness.memory.tracker` after collection, for that pytest process only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

import harness.loading.fused_nvfp4 as fused_nvfp4
import harness.memory.tracker as tracker
from harness.core.formats import decode
from harness.core.quantize import expand_scale
from harness.platform.info import FNUZ_ARCHS, PlatformInfo

ENV = "QHARNESS_CANARY_MUTANT"


@contextmanager
def measure_cuda_total_minus_free(result: tracker.PeakMeasurement) -> Iterator[None]:
    """Seed bug, total minus free: device memory in use (mem_get_info) after the region
    minus before it, instead of the allocator's peak after empty_cache + reset."""
    if not torch.cuda.is_available():
        raise tracker.MeasurementError(
            f"platform says {result.device} but torch.cuda is not available in this process"
        )
    device = torch.cuda.current_device()
    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    start_used, start_allocated = total - free, torch.cuda.memory_allocated(device)
    try:
        yield
    finally:
        torch.cuda.synchronize(device)
        free, total = torch.cuda.mem_get_info(device)
        result.peak_bytes = (total - free) - start_used
        result.retained_bytes = torch.cuda.memory_allocated(device) - start_allocated


_original_measure_peak = tracker.measure_peak


@contextmanager
def measure_peak_gated_on_cuda(platform: PlatformInfo) -> Iterator[tracker.PeakMeasurement]:
    """Seed bug, ``is_cuda()`` gating: the allocator branch runs on CUDA only, so ROCm
    falls through to the CPU tracker (which sees no device tensors)."""
    with tracker._exclusive():
        if platform.device == "cuda":  # the one change: was platform.is_cuda_alike
            result = tracker.PeakMeasurement("cuda_allocator", platform.device)
            with tracker._measure_cuda(result):
                yield result
        else:
            result = tracker.PeakMeasurement("storage_tracker", platform.device)
            with tracker._measure_cpu(result):
                yield result


def _plant_total_minus_free() -> None:
    tracker._measure_cuda = measure_cuda_total_minus_free  # type: ignore[assignment]


def _plant_is_cuda_gating() -> None:
    for module in list(sys.modules.values()):
        if getattr(module, "measure_peak", None) is _original_measure_peak:
            module.measure_peak = measure_peak_gated_on_cuda  # type: ignore[union-attr]


def fp8_format_gated_on_rocm(self: PlatformInfo) -> str:
    """Seed bug, device-kind gating: the FP8 flavour follows "is this ROCm" before the arch,
    so wherever gfx942 is not a ROCm device (a simulation on a CPU runner) it gets e4m3fn.
    Right on a real MI300X, so only the simulated gfx942 run can catch it."""
    return "e4m3fnuz" if self.device == "rocm" and self.arch in FNUZ_ARCHS else "e4m3fn"


def _plant_fp8_flavour_gated_on_rocm() -> None:
    PlatformInfo.fp8_format = property(fp8_format_gated_on_rocm)  # type: ignore[assignment,method-assign]


def fuse_under_one_shard_global(ckpt: fused_nvfp4.FusedNvfp4Checkpoint) -> fused_nvfp4.LoadedNvfp4:
    """A fused NVFP4 layer under one shard's global without requantizing: the smallest
    shard global (the shard of the largest amax: the largest of the stored divisors 1 / g)
    for the whole layer, every shard's codes and block scales kept. Otherwise the harness's
    loader (`harness_fuse`), which refuses such a checkpoint."""
    shared = min(float(s.global_scale) for s in ckpt.shards)
    values = torch.cat(
        [
            decode(s.codes, s.spec.format).double()
            * expand_scale(s.scale.double(), s.spec, s.codes.shape)
            * shared
            for s in ckpt.shards
        ]
    )
    return fused_nvfp4.LoadedNvfp4(values, torch.tensor([shared], dtype=torch.float32))


def _plant_nvfp4_one_global() -> None:
    fused_nvfp4.NVFP4_FUSERS["harness"] = fuse_under_one_shard_global


MUTANTS: dict[str, Callable[[], None]] = {
    "canary_total_minus_free": _plant_total_minus_free,
    "canary_is_cuda_gating": _plant_is_cuda_gating,
    "canary_fp8_flavour_rocm_gating": _plant_fp8_flavour_gated_on_rocm,
    "canary_nvfp4_fused_one_global": _plant_nvfp4_one_global,
}


def pytest_collection_finish(session: Any) -> None:
    """Plant the mutant once every test module is imported (they import the functions)."""
    name = os.environ.get(ENV)
    if name is None:
        raise pytest.UsageError(f"tests.canaries.mutants needs {ENV} (one of {sorted(MUTANTS)})")
    MUTANTS[name]()
