"""Peak memory: the measurement (`tracker`), the per-path memory model (`budget`) and the
forward-call check (`check`)."""

from harness.memory.tracker import PeakMeasurement, measure_peak

__all__ = ["PeakMeasurement", "measure_peak"]
