"""Where we run: device detection (`info`) and capability probes with per-arch
expectations (`capabilities`).

`PlatformInfo` and `detect` are imported on first use (PEP 562), so a module that needs
only the platform's names (`simulate.key_of`: a report over results files) loads no torch.

Modules, each with its one job:

- ``info``, ``capabilities``, ``devices``, ``threads``, ``workers``, ``runner``,
  ``simulate``, ``interpreter_fp8``: A simulated platform (below) from `QHARNESS_SIMULATE`,
  and FP8 NaN codes read as NaN under its interpreter (`fp8_nan_codes_read_as_nan`, for
  adapters' kernel calls); `QHARNESS_GPUS` validated into GPU ordinals; the runner's
  identity (label from `--runner-label`/`QHARNESS_RUNNER`, torch, CUDA/HIP, driver) and its
  key `<platform>[@label]`; `run --workers auto` as one pinned worker per visible GPU on a
  GPU runner; the cores shared among pytest-xdist workers (each worker gets cores / workers
  intra-op threads unless `OMP_NUM_THREADS` says otherwise: n workers each spinning n
  threads ran the suite 4x slower on two cores); device kind, arch, `is_cuda_alike`, FP8
  flavour, `platform_key` (the one key per-platform tables use); capability probes that run
  tiny ops with exact answers (cached), and the per-arch expectations table.
- ``triton_kernels``: Two tiny Triton kernels the simulated platform's capability probes run
  under the interpreter (below); imported only by such a probe, and only where triton is
  installed.

Simulated platform (Triton's interpreter):

(`QHARNESS_SIMULATE=torch:<arch>` needs no triton: docs/ARCHITECTURE.md, simulate.py.)
`QHARNESS_SIMULATE=triton-interpret:<arch>` (`harness run|platform --simulate ...`; arch
`gfx942`, `gfx950`, `sm_90`; `harness/platform/simulate.py`) runs a GPU arch's Triton kernel
source on this CPU under `TRITON_INTERPRET=1`. `PlatformInfo.simulated` is
`"triton-interpret"` (None on real hardware), `arch` the simulated arch, the FP8 flavour
follows it (gfx942: e4m3fnuz; gfx950, sm_90: e4m3fn), tensors stay on the CPU, and
`platform_key` is `triton-interpret-<arch>`, never a real key, so results, the run directory
name, the history and the report keep it as its own platform. Its capability rows expect the
interpreted ops the arch's kernels use (`triton.dot.<fp8>`, `triton.dot_scaled.e2m1` on
gfx950; `harness/platform/triton_kernels.py` are the probes' kernels); torch's own `native`
linear and MoE paths skip there (their kernels would be the CPU's), and peak memory is not
measured (the test runs; `peak_skipped` says why; `suites/test_memory.py` skips). Scope: the
interpreter checks a kernel's algorithm (indexing, masks, tails, scale application, step
order, the conversions written in the kernel, dispatch), not the hardware's arithmetic (MFMA
accumulation order, hardware FP8 conversion, `dot_scaled` in silicon). The interpreter reads
FP8 NaN codes as finite numbers; the aiter and vLLM Triton linear paths call their kernels
with them read as NaN (`harness/platform/interpreter_fp8.py`), so the special-values suite
judges those kernels there. The interpreter's own conversion and dot semantics are stated in
docs/ENGINES-ADAPTERS.md#the-triton-interpreters-numerics. Any other path (plain torch) runs
there as CPU code: each record says what it ran (``execution``: `simulate.EXECUTIONS`; a
path declares ``runs_kernel_source``, harness.paths.execution), and so do the report's
matrix and summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.platform.info import PlatformInfo, detect

__all__ = ["PlatformInfo", "detect"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from harness.platform import info

        return getattr(info, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
