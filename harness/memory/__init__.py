"""Peak memory: the measurement (`tracker`), the per-path memory model (`budget`) and the
forward-call check (`check`).

Modules, each with its one job:

- ``tracker``: `measure_peak(platform)`: on CUDA and ROCm (`is_cuda_alike`) the allocator's
  `max_memory_allocated` after `empty_cache` + `reset_peak_memory_stats`; on CPU a
  dispatch-mode storage tracker exact for every storage an op returns.
- ``budget``: The memory model: weight bytes per layout (`held` by a loaded layer, `packed`
  for kernels, `ideal` element bits) and per-path forward budgets of documented terms; only
  `emulated` may dequantize the weight.
- ``check``: Two consecutive forward calls, measured after a warm-up on a copy of the layer,
  checked against the budget and the no-bf16-weight-copy rule; bytes left alive after the
  outputs are dropped and bytes the layer gained are violations (a cached dequantized weight
  cannot hide); `suites/test_memory.py` applies it to every scheme x path, and the plugin's
  `measure_memory` fixture records `peak_bytes` in every linear result.
"""

from harness.memory.tracker import PeakMeasurement, measure_peak

__all__ = ["PeakMeasurement", "measure_peak"]
