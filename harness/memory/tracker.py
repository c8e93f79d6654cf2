"""Peak memory of a region of code, measured the same way on every platform.

``with measure_peak(platform) as m: ...`` then ``m.peak_bytes``: the largest number of bytes
allocated *inside* the region and alive at the same time, above what was allocated when the
region began. Tensors created before the region do not count; tensors that outlive it count
while they are alive and are reported as ``m.retained_bytes``.

- CUDA and ROCm (`PlatformInfo.is_cuda_alike`): the caching allocator's own statistics.
  Synchronize, release cached blocks, reset the peak, read the allocation at the start; after
  the region, ``max_memory_allocated() - start``. Never total-minus-free from ``mem_get_info``,
  which counts other processes and the allocator's cache.
- CPU, where torch keeps no allocator statistics: `StorageTracker`, a dispatch mode that sees
  every op, records the storage of each tensor an op returns that is new (not a view, alias,
  in-place or ``out=`` result of an argument), and frees it through a weak-reference callback
  on the untyped storage, so views and aliases sharing a storage are counted once. Exact for every
  storage an op returns (margin 0); it cannot see scratch buffers a kernel allocates and frees
  inside one op, nor memory allocated on other threads or outside torch (``from_numpy``).
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.errors import QHarnessError
from harness.platform.info import PlatformInfo

__all__ = [
    "CUDA_ALLOCATOR_ROUNDING",
    "MeasurementError",
    "PeakMeasurement",
    "StorageTracker",
    "cuda_allocator_size",
    "measure_peak",
]

# The CUDA/ROCm caching allocator hands out blocks in multiples of 512 bytes; its statistics
# count block sizes, so a tracker compared against it rounds each storage the same way.
CUDA_ALLOCATOR_ROUNDING = 512

# Ops whose output aliases an argument that the op's caller created for this very call:
# ``torch.tensor(data)`` builds the tensor outside the dispatcher and passes it through
# ``lift_fresh``, which returns it unchanged. Its storage is a new allocation of the region.
_FRESH_ALIAS_OPS: frozenset[Any] = frozenset({torch.ops.aten.lift_fresh.default})


class MeasurementError(QHarnessError, RuntimeError):
    """A measurement that cannot be made as asked (nested regions, no GPU statistics)."""


@dataclass
class PeakMeasurement:
    """The result of one measured region (filled in when the region ends)."""

    method: str  # "cuda_allocator" or "storage_tracker"
    device: str
    peak_bytes: int = 0  # most bytes allocated inside the region alive at once
    retained_bytes: int = 0  # bytes allocated inside the region still alive when it ended
    allocations: int | None = None  # storages allocated (tracker only; None for the allocator)

    def record_fields(self) -> dict[str, Any]:
        """Metrics for a result record (harness.plugin record_result)."""
        return {
            "peak_bytes": self.peak_bytes,
            "peak_method": self.method,
        }


def peak_not_meaningful(platform: PlatformInfo) -> str:
    """Why peak memory is not measured on a simulated platform (the skip reason)."""
    return (
        f"peak memory means nothing on a simulated platform ({platform.simulated}): kernels "
        "run in the interpreter's numpy arrays on the CPU, not in the GPU's allocator"
    )


def cuda_allocator_size(nbytes: int) -> int:
    """Bytes the CUDA/ROCm caching allocator accounts for a request of ``nbytes``."""
    if nbytes == 0:
        return 0
    return math.ceil(nbytes / CUDA_ALLOCATOR_ROUNDING) * CUDA_ALLOCATOR_ROUNDING


def _exact_size(nbytes: int) -> int:
    return nbytes


def _tensors(values: Any) -> Iterator[torch.Tensor]:
    """Tensors in an op's arguments or results: aten signatures nest them at most in
    lists/tuples (``Tensor[]``, ``Tensor?[]``) and kwargs, so no general pytree walk is needed."""
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _tensors(value)
        elif isinstance(value, dict):
            yield from _tensors(value.values())


def _storages(values: Any, device_type: str | None) -> dict[int, torch.UntypedStorage]:
    """Untyped storages of the strided tensors in ``values`` on ``device_type`` (any device
    but meta when None), by storage identity."""
    found: dict[int, torch.UntypedStorage] = {}
    for t in _tensors(values):
        on_device = t.device.type == device_type if device_type else t.device.type != "meta"
        if t.layout == torch.strided and on_device:
            storage = t.untyped_storage()
            found[storage._cdata] = storage
    return found


class StorageTracker(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Live and peak bytes of the tensor storages allocated while the mode is active.

    A storage is new when an op returns it and it is none of the op's arguments' storages
    (``lift_fresh`` excepted, see `_FRESH_ALIAS_OPS`); views, in-place ops and ``out=`` return
    an argument's storage and allocate nothing. A storage an op resizes (``out=`` into a
    too-small tensor, ``resize_``) is reallocated: the new size is allocated while the old is
    still alive, then the old is freed. ``size_of`` maps a storage's byte count to what the
    allocator accounts (identity on CPU, `cuda_allocator_size` to compare with CUDA).
    Works for tensors on any device (``device_type`` restricts it to one); only ops on the
    thread that entered the mode are seen.
    """

    def __init__(
        self, size_of: Callable[[int], int] = _exact_size, device_type: str | None = None
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.size_of = size_of
        self.device_type = device_type  # count only storages on this device type (None: all)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.allocations = 0
        self._sizes: dict[int, int] = {}  # storage id -> accounted bytes, for tracked storages
        self._refs: dict[int, weakref.ref[torch.UntypedStorage]] = {}  # callbacks free
        # Weak-reference callbacks run whenever a storage dies, which the garbage collector
        # may trigger on any thread, or on this one while the lock is held: reentrant.
        self._lock = threading.RLock()
        self._open = False

    def __enter__(self) -> StorageTracker:
        self._open = True
        super().__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)  # type: ignore[no-untyped-call]
        with self._lock:
            self._open = False
            self._refs.clear()  # dropping the weak references drops their callbacks

    @property
    def retained_bytes(self) -> int:
        """Bytes of tracked storages alive now (after the region: those that outlived it)."""
        return self.live_bytes

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        inputs = _storages((args, kwargs), self.device_type)
        before = {key: storage.nbytes() for key, storage in inputs.items()}
        out = func(*args, **kwargs)
        fresh_alias = func in _FRESH_ALIAS_OPS
        for key, storage in _storages((out,), self.device_type).items():
            if key in self._sizes:
                self._resized(key, storage)
            elif key in inputs and not fresh_alias:
                if storage.nbytes() != before[key]:  # out= or resize_ grew an older storage
                    self._track(key, storage, self.size_of(before[key]))
                    self._resized(key, storage)
            else:
                self._allocate(key, storage)
        return out

    def _allocate(self, key: int, storage: torch.UntypedStorage) -> None:
        nbytes = self.size_of(storage.nbytes())
        self._track(key, storage, nbytes)
        with self._lock:
            self.allocations += 1
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _track(self, key: int, storage: torch.UntypedStorage, nbytes: int) -> None:
        self._sizes[key] = nbytes
        self._refs[key] = weakref.ref(storage, functools.partial(self._freed, key))

    def _resized(self, key: int, storage: torch.UntypedStorage) -> None:
        new = self.size_of(storage.nbytes())
        old = self._sizes[key]
        if new == old:
            return
        with self._lock:
            self.allocations += 1
            self.live_bytes += new  # the new buffer exists while the old one is copied
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            self.live_bytes -= old
            self._sizes[key] = new

    def _freed(self, key: int, _ref: object) -> None:
        with self._lock:
            if not self._open:
                return
            self.live_bytes -= self._sizes.pop(key, 0)
            self._refs.pop(key, None)


# Only one measured region at a time per process: the CUDA peak statistic is global, and
# nested regions would reset each other's peaks.
_active = threading.Lock()


@contextmanager
def _exclusive() -> Iterator[None]:
    if not _active.acquire(blocking=False):
        raise MeasurementError(
            "measure_peak regions cannot nest (the allocator has one peak statistic); "
            "measure the inner region on its own"
        )
    try:
        yield
    finally:
        _active.release()


@contextmanager
def _measure_cuda(result: PeakMeasurement) -> Iterator[None]:
    if not torch.cuda.is_available():
        raise MeasurementError(
            f"platform says {result.device} but torch.cuda is not available in this process"
        )
    device = torch.cuda.current_device()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    try:
        yield
    finally:
        torch.cuda.synchronize(device)
        result.peak_bytes = torch.cuda.max_memory_allocated(device) - start
        result.retained_bytes = torch.cuda.memory_allocated(device) - start


@contextmanager
def _measure_cpu(result: PeakMeasurement) -> Iterator[None]:
    tracker = StorageTracker(device_type="cpu")
    try:
        with tracker:
            yield
    finally:
        result.peak_bytes = tracker.peak_bytes
        result.retained_bytes = tracker.retained_bytes
        result.allocations = tracker.allocations


@contextmanager
def measure_peak(platform: PlatformInfo) -> Iterator[PeakMeasurement]:
    """Measure the peak bytes allocated inside the ``with`` block on ``platform``'s device.

    On CUDA/ROCm the result counts allocator blocks (multiples of 512 bytes) and everything
    allocated on the device, kernel workspaces included; run a warm-up call first when a
    library allocates a persistent workspace on first use (cuBLAS does). On CPU it counts
    op outputs exactly (see `StorageTracker`). The fields are set when the block exits.
    """
    with _exclusive():
        if platform.is_cuda_alike:
            result = PeakMeasurement("cuda_allocator", platform.device)
            with _measure_cuda(result):
                yield result
        else:
            result = PeakMeasurement("storage_tracker", platform.device)
            with _measure_cpu(result):
                yield result
