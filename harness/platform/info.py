"""What machine are we on: device kind, architecture and the platform's FP8 flavour.

Detection only names the platform. What the platform can *run* is found by the
capability probe (`harness.platform.capabilities`), never inferred from the name.
"""

from __future__ import annotations

import functools
import os
import platform as _stdlib_platform
from dataclasses import asdict, dataclass
from typing import Any

import torch

from harness.platform.simulate import (
    SIMULATED_ARCHS,
    key_of,
    simulation_from_environment,
)
from harness.platform.simulate import (
    dispatch_key as _dispatch_key,
)

# Architectures whose FP8 hardware format is e4m3fnuz (bias 8). Explicit table, no prefixes.
FNUZ_ARCHS: frozenset[str] = frozenset({"gfx940", "gfx941", "gfx942"})


@dataclass(frozen=True)
class PlatformInfo:
    device: str  # "cpu" | "cuda" | "rocm"
    arch: str  # "sm_90", "gfx942", "gfx950", or the CPU's machine name ("x86_64")
    name: str  # human-readable device name
    torch_version: str
    cuda_version: str | None
    hip_version: str | None
    # "triton-interpret" or "torch" when a GPU arch is simulated on this CPU (a key of
    # harness.platform.simulate.SIMULATORS),
    # None on real hardware. Then `arch` is the simulated arch and tensors stay on the CPU.
    simulated: str | None = None

    @property
    def is_cuda_alike(self) -> bool:
        """True on CUDA *and* ROCm: both expose torch.cuda and its allocator statistics."""
        return self.device in ("cuda", "rocm")

    @property
    def torch_device(self) -> torch.device:
        return torch.device("cuda" if self.is_cuda_alike else "cpu")

    @property
    def fp8_format(self) -> str:
        """The FP8 e4m3 flavour this platform's kernels use natively."""
        return "e4m3fnuz" if self.arch in FNUZ_ARCHS else "e4m3fn"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["is_cuda_alike"] = self.is_cuda_alike
        data["fp8_format"] = self.fp8_format
        data["fp8_dtype"] = f"float8_{self.fp8_format}"
        data["platform_key"] = platform_key(self)
        return data


def platform_key(platform: PlatformInfo) -> str:
    """The key per-platform tables are indexed by: "cpu", the GPU architecture, or
    ``<simulator>-<arch>`` ("triton-interpret-gfx942") under simulation, never a real key.

    Capability expectations, the native dispatch tables and run ids all use this one rule.
    """
    return key_of(platform.device, platform.arch, platform.simulated)


def native_dispatch_key(platform: PlatformInfo) -> str:
    """The native dispatch tables' row for this platform: `platform_key`, except under a
    ``torch:<arch>`` simulation, where torch's CPU kernels run the arch's row."""
    return _dispatch_key(platform.device, platform.arch, platform.simulated)


def _gpu_arch() -> str:
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        return str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
    return f"sm_{props.major}{props.minor}"


@functools.cache
def detect() -> PlatformInfo:
    """Detect the platform once per process (``QHARNESS_SIMULATE`` names a simulated one)."""
    simulation = simulation_from_environment(os.environ)
    if simulation is not None:
        host = _stdlib_platform.processor() or _stdlib_platform.machine() or "cpu"
        product = SIMULATED_ARCHS[simulation.arch].device_name
        return PlatformInfo(
            device="cpu",
            arch=simulation.arch,
            name=f"{simulation.simulator} simulating {simulation.arch} ({product}) on {host}",
            torch_version=torch.__version__,
            cuda_version=None,
            hip_version=None,
            simulated=simulation.simulator,
        )
    if torch.cuda.is_available():
        return PlatformInfo(
            device="rocm" if torch.version.hip else "cuda",
            arch=_gpu_arch(),
            name=torch.cuda.get_device_name(0),
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            hip_version=torch.version.hip,
        )
    return PlatformInfo(
        device="cpu",
        arch=_stdlib_platform.machine() or "unknown",
        name=_stdlib_platform.processor() or _stdlib_platform.machine() or "cpu",
        torch_version=torch.__version__,
        cuda_version=None,
        hip_version=None,
    )


# The front door's name for `detect` (``from harness import detect_platform``): adapters
# whose kernels are called without a platform (a path's forward) ask for it.
detect_platform = detect
