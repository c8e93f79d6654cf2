"""The CPU storage tracker against hand-counted programs, the one measuring API, and (on a
GPU) the tracker against the CUDA/ROCm allocator on the same program.

Every expected number below is counted by hand from shapes and dtypes: float32 is 4 bytes,
bfloat16 2, int64 8, bool 1.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from harness.memory.tracker import (
    MeasurementError,
    StorageTracker,
    cuda_allocator_size,
    measure_peak,
)
from harness.platform.info import PlatformInfo, detect

CPU = PlatformInfo("cpu", "test", "test", torch.__version__, None, None)


def test_allocate_free_allocate() -> None:
    with StorageTracker() as t:
        a = torch.empty(1000)  # 4000
        b = torch.empty(500)  # 2000 -> 6000 live, the peak
        del a  # 2000
        c = torch.empty(250)  # 1000 -> 3000
        d = torch.empty(750, dtype=torch.int64)  # 6000 -> 9000, the new peak
        del b, d  # 1000
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (9000, 1000, 4)
    del c


def test_views_and_aliases_share_one_storage() -> None:
    with StorageTracker() as t:
        a = torch.empty(10, 20)  # 800
        views = [a[2:5], a.t(), a.view(200), a.reshape(20, 10), a.detach(), a.float(), a.T]
        views += [a.unsqueeze(0).expand(3, 10, 20), a.to("cpu"), *a.split(5), a.narrow(1, 0, 3)]
        del a  # the views keep the storage alive
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (800, 800, 1)
    views.clear()


def test_reshape_that_must_copy_allocates() -> None:
    a = torch.empty(10, 20)
    with StorageTracker() as t:
        b = a.t().reshape(200)  # a transposed tensor cannot be viewed flat: a copy, 800
    assert (t.peak_bytes, t.retained_bytes) == (800, 800)
    del b


def test_in_place_and_out_ops_allocate_nothing_new() -> None:
    a, b = torch.ones(100), torch.ones(100)
    out = torch.empty(100)
    with StorageTracker() as t:
        a.add_(b)
        a.mul_(2).clamp_(max=3.0)
        a.copy_(b)
        torch.add(a, b, out=out)
        torch.mul(a, 3, out=a)
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (0, 0, 0)


def test_out_into_too_small_tensor_counts_the_resize() -> None:
    a = torch.ones(100)
    small = torch.empty(10)  # 40 bytes, allocated before the region
    with StorageTracker() as t:
        # Reallocated to 400 while the old 40 is copied, then the old buffer is freed: as
        # with the CUDA allocator, that free of older memory is credited (live 360).
        small.resize_(100)
        grown = torch.empty(0)  # 0
        torch.mul(a, 2, out=grown)  # an out= tensor with no elements grows: 0 -> 400
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (760, 760, 3)
    del grown


def test_matmul_allocates_only_its_output() -> None:
    a, b = torch.randn(8, 16), torch.randn(32, 16)
    with StorageTracker() as t:
        y = a @ b.t()  # [8, 32] float32: 1024
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (1024, 1024, 1)
    del y


def test_expression_temporaries_are_freed() -> None:
    a, b = torch.ones(1000), torch.ones(1000)
    with StorageTracker() as t:
        y = ((a + b) * a).to(torch.bfloat16)  # temp 4000, product 4000, then bf16 2000
    # The sum is freed once the product exists; the product once the bf16 copy exists.
    assert (t.peak_bytes, t.retained_bytes, t.allocations) == (8000, 2000, 3)
    del y


def test_factory_functions_inside_the_region_count() -> None:
    with StorageTracker() as t:
        made = [
            torch.empty(10),  # 40
            torch.zeros(10, dtype=torch.bfloat16),  # 20
            torch.ones(5, dtype=torch.int64),  # 40
            torch.randn(4, 4),  # 64
            torch.full((3,), 2.0),  # 12
            torch.arange(6),  # int64: 48
            torch.tensor([1.0, 2.0]),  # 8, built outside the dispatcher and lifted
            torch.zeros_like(torch.empty(7)),  # 28 + 28
            torch.linspace(0, 1, 5),  # 20
        ]
    # The peak is reached by zeros_like, while its temporary input (28) is alive; the
    # temporary is freed before linspace (20) allocates.
    assert t.peak_bytes == 40 + 20 + 40 + 64 + 12 + 48 + 8 + 28 + 28
    assert t.retained_bytes == 40 + 20 + 40 + 64 + 12 + 48 + 8 + 28 + 20
    assert t.allocations == 10
    made.clear()


def test_multi_output_op_counts_each_output() -> None:
    a = torch.randn(100)
    with StorageTracker() as t:
        values, indices = torch.sort(a)  # float32 400 + int64 800
    assert (t.peak_bytes, t.allocations) == (1200, 2)
    del values, indices


def test_tensors_from_before_the_region_do_not_count() -> None:
    before = torch.empty(10_000)
    with StorageTracker() as t:
        view = before[:10]
        before.zero_()
        del before, view  # freeing older memory inside the region is not credited
        new = torch.empty(10)  # 40
    assert (t.peak_bytes, t.retained_bytes) == (40, 40)
    del new


def test_tensors_outliving_the_region_are_retained_and_frozen() -> None:
    with StorageTracker() as t:
        kept = torch.empty(100)  # 400
        temp = torch.empty(50)  # 200 -> peak 600
        del temp
    assert (t.peak_bytes, t.retained_bytes) == (600, 400)
    del kept  # after the region: the numbers no longer change
    assert (t.peak_bytes, t.retained_bytes) == (600, 400)


def test_measure_peak_on_cpu_uses_the_tracker() -> None:
    a = torch.ones(256)
    with measure_peak(CPU) as m:
        y = a * 2  # 1024
        z = y + 1  # 1024
        del y
    assert (m.method, m.peak_bytes, m.retained_bytes, m.allocations) == (
        "storage_tracker",
        2048,
        1024,
        2,
    )
    assert m.record_fields()["peak_bytes"] == 2048
    del z


def test_measure_peak_regions_do_not_nest() -> None:
    with (
        measure_peak(CPU),
        pytest.raises(MeasurementError, match="cannot nest"),
        measure_peak(CPU),
    ):
        pass
    with measure_peak(CPU) as m:  # the outer region released the lock
        torch.empty(3)
    assert m.peak_bytes == 12


def _allocate_then_raise(keep: list[torch.Tensor]) -> None:
    keep.append(torch.empty(25))  # 100
    raise ValueError("boom")


def test_measurement_survives_an_exception() -> None:
    kept: list[torch.Tensor] = []
    with pytest.raises(ValueError, match="boom"), measure_peak(CPU) as m:
        _allocate_then_raise(kept)
    assert m.peak_bytes == 100
    with measure_peak(CPU) as again:  # the mode was popped: nothing left counting
        torch.empty(1)
    assert again.peak_bytes == 4
    del kept


def test_device_filter_counts_one_device_type() -> None:
    with StorageTracker(device_type="meta") as meta_only:
        torch.empty(100)  # CPU: not counted
        kept = torch.empty(100, device="meta")  # 400 "bytes" on the meta device
    assert meta_only.peak_bytes == 400
    with StorageTracker() as default:
        torch.empty(100, device="meta")  # meta tensors hold no memory: not counted
    assert default.peak_bytes == 0
    del kept


def test_cuda_allocator_size_rounds_to_blocks() -> None:
    assert [cuda_allocator_size(n) for n in (0, 1, 512, 513, 4096)] == [0, 512, 512, 1024, 4096]


# ---------------------------------------------------------------- GPU self-test
def _gpu_programs(device: torch.device) -> dict[str, Callable[[], object]]:
    """Programs with no kernel-internal scratch, so the allocator sees only op outputs."""

    def alloc_free() -> object:
        a = torch.empty(1000, device=device)
        b = torch.empty(3000, device=device)
        del a
        c = torch.ones(2000, device=device, dtype=torch.bfloat16)
        return b, c

    def views_inplace() -> object:
        a = torch.zeros(64, 64, device=device)
        v = a.t()[3:9]
        v.add_(1)
        torch.mul(a, 2, out=a)
        return a.float() + 1

    def matmul() -> object:
        a = torch.randn(64, 128, device=device)
        b = torch.randn(256, 128, device=device)
        return a @ b.t()

    return {"alloc_free": alloc_free, "views_inplace": views_inplace, "matmul": matmul}


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA/ROCm device: the tracker-vs-allocator self-test needs a GPU",
)
@pytest.mark.parametrize("program", ["alloc_free", "views_inplace", "matmul"])
def test_tracker_matches_cuda_allocator(program: str) -> None:
    platform = detect()
    assert platform.is_cuda_alike
    run = _gpu_programs(platform.torch_device)[program]
    run()  # warm-up: cuBLAS keeps a workspace from its first GEMM on
    device_type = platform.torch_device.type
    with (
        measure_peak(platform) as allocator,
        StorageTracker(cuda_allocator_size, device_type) as tracker,
    ):
        result = run()
    assert (tracker.peak_bytes, tracker.retained_bytes) == (
        allocator.peak_bytes,
        allocator.retained_bytes,
    )
    del result


# ------------------------------------------- the allocator branch, without a GPU
class _ScriptedAllocator:
    """torch.cuda as measure_peak sees it: allocator statistics, a block cache, and other
    processes' memory, which only ``mem_get_info`` (total minus free) would count."""

    TOTAL = 80 << 30

    def __init__(self) -> None:
        self.allocated = 1000  # live before the region (not counted)
        self.peak = 10**7  # stale peak of an earlier region: must be reset
        self.cached = 10**6  # blocks the allocator keeps after frees
        self.other_processes = 1 << 30

    def allocate(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        self.cached = max(self.cached, self.allocated)

    def functions(self) -> dict[str, Callable[..., object]]:
        def empty_cache() -> None:
            self.cached = self.allocated

        def reset_peak_memory_stats(device: object = None) -> None:
            self.peak = self.allocated

        def mem_get_info(device: object = None) -> tuple[int, int]:
            return self.TOTAL - self.cached - self.other_processes, self.TOTAL

        return {
            "is_available": lambda: True,
            "current_device": lambda: 0,
            "synchronize": lambda device=None: None,
            "empty_cache": empty_cache,
            "reset_peak_memory_stats": reset_peak_memory_stats,
            "memory_allocated": lambda device=None: self.allocated,
            "max_memory_allocated": lambda device=None: self.peak,
            "mem_get_info": mem_get_info,
        }


@pytest.mark.parametrize("device", ["cuda", "rocm"])
def test_measure_peak_on_cuda_alike_platforms_reads_allocator_statistics(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CUDA *and* ROCm the peak is max_memory_allocated after empty_cache + reset, minus
    the allocation at the start; not total minus free, not the CPU tracker."""
    fake = _ScriptedAllocator()
    for name, function in fake.functions().items():
        monkeypatch.setattr(torch.cuda, name, function)
    platform = PlatformInfo(device, "sm_90" if device == "cuda" else "gfx942", "t", "t", None, None)
    with measure_peak(platform) as m:
        fake.allocate(3000)
        fake.allocate(-2000)
        fake.other_processes += 1 << 20  # another process grows meanwhile
        fake.allocate(500)
    assert (m.method, m.peak_bytes, m.retained_bytes) == ("cuda_allocator", 3000, 1500), (
        f"allocator statistics not read on {device}: {m.method}, peak {m.peak_bytes}, "
        f"retained {m.retained_bytes}; expected cuda_allocator, 3000, 1500"
    )
