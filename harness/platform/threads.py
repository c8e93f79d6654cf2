"""CPU threads for each pytest-xdist worker: the cores shared out, not multiplied.

torch gives every process one intra-op thread per core. n xdist workers on n cores then run
n * n threads, whose OpenMP spin-waits fight each other: on a 2-core machine the default suite
took 80 s with ``-n 2`` against 25 s serially, and 20 s once each worker kept one thread.
An explicit ``OMP_NUM_THREADS`` (or MKL's) is the user's choice and is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
WORKER_COUNT_VARIABLE = "PYTEST_XDIST_WORKER_COUNT"


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def threads_per_worker(environ: Mapping[str, str], cores: int) -> int | None:
    """Intra-op threads for one xdist worker, or None to leave torch's default (not a
    worker, or the user set a thread count)."""
    if any(environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return None
    try:
        workers = int(environ.get(WORKER_COUNT_VARIABLE, ""))
    except ValueError:
        return None
    if workers < 1:
        return None
    return max(1, cores // workers)


def share_cores_among_workers(environ: Mapping[str, str]) -> int | None:
    """Apply `threads_per_worker` to torch in this process; returns the count set, if any."""
    threads = threads_per_worker(environ, usable_cores())
    if threads is not None:
        import torch  # only on an active worker: the inert plugin never imports torch

        torch.set_num_threads(threads)
    return threads
