"""What a test ran on a simulated platform: a GPU kernel's source under the interpreter,
CPU code held to the simulated arch's expectations, or nothing.

Under ``triton-interpret:<arch>`` only Triton kernel source is the arch's code; a path
written in plain torch still runs (on the CPU), and its pass says nothing about the arch's
kernels. A path declares ``runs_kernel_source = True`` when what it calls is GPU kernel
source that the simulation interprets (the aiter and vLLM Triton adapters do); any other
path is CPU code there. Each record on a simulated platform carries one key of
`harness.platform.simulate.EXECUTIONS` (the ``execution`` field, docs/CLI.md); on real
hardware the field is absent.
"""

from __future__ import annotations

from harness.paths.base import runs_kernel_source
from harness.platform.info import PlatformInfo
from harness.platform.simulate import CPU_CODE, INTERPRETED


def execution_of(path: object, platform: PlatformInfo) -> str | None:
    """What ``path`` runs on ``platform``: a `harness.platform.simulate.EXECUTIONS` key on
    a simulated platform, None on real hardware (where the platform says what ran)."""
    if platform.simulated is None:
        return None
    return INTERPRETED if runs_kernel_source(path) else CPU_CODE
