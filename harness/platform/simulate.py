"""A simulated platform: a GPU architecture's expectations held on a CPU.

Two kinds (`SIMULATORS`): ``triton-interpret:<arch>`` runs the arch's Triton kernel source
under Triton's interpreter (needs triton); ``torch:<arch>`` needs nothing beyond torch: the
pure-torch paths (native through the arch's dispatch row, emulated), the FP8 normalization
and the supported-scheme list run as CPU code held to the arch's expectations (FP8 flavour,
clamp values, dispatch), so a platform-conditional branch runs on any CPU runner.

``QHARNESS_SIMULATE=triton-interpret:<arch>`` (or ``harness run|platform --simulate ...``)
makes the platform report the simulated architecture: its FP8 flavour, its dispatch and
capability rows, and a `platform_key` of its own (``triton-interpret-gfx942``) that never
equals a real GPU's, so results under simulation are never merged with hardware results.
Tensors stay on the CPU and Triton kernels run under ``TRITON_INTERPRET=1``, which checks a
kernel's algorithm (indexing, masks, tails, scale application, step order, the conversions
written in the kernel, dispatch), not the hardware's arithmetic (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import EnvironmentValueError

SIMULATE_VARIABLE = "QHARNESS_SIMULATE"
INTERPRET_VARIABLE = "TRITON_INTERPRET"  # read by triton.jit when a kernel module imports
TRITON_INTERPRET = "triton-interpret"
TORCH = "torch"


@dataclass(frozen=True)
class SimulatedArch:
    """One architecture the interpreter can stand in for."""

    arch: str
    device_name: str  # the product the arch names, for the platform's ``name``


# Explicit table: the architectures whose kernel branches the engines ship and the harness
# has capability and dispatch rows for.
SIMULATED_ARCHS: dict[str, SimulatedArch] = {
    "gfx942": SimulatedArch("gfx942", "MI300X"),
    "gfx950": SimulatedArch("gfx950", "MI350X"),
    "sm_90": SimulatedArch("sm_90", "H100"),
}
# Simulators: the name in the variable -> the Python module it needs (None: torch alone).
SIMULATORS: dict[str, str | None] = {TRITON_INTERPRET: "triton", TORCH: None}
# Simulators under which torch's own kernels (`_scaled_mm`, grouped GEMM) stand for the
# arch's: the native paths dispatch by the arch's row there. Under the interpreter they do
# not (only Triton kernel source is the arch's code), so the native paths skip.
TORCH_KERNELS_AS_ARCH: frozenset[str] = frozenset({TORCH})


@dataclass(frozen=True)
class Simulation:
    simulator: str  # a key of SIMULATORS
    arch: str  # a key of SIMULATED_ARCHS

    @property
    def value(self) -> str:
        """The ``QHARNESS_SIMULATE`` value naming this simulation."""
        return f"{self.simulator}:{self.arch}"

    @property
    def key(self) -> str:
        """The platform key: never a real arch or "cpu"."""
        return f"{self.simulator}-{self.arch}"


def parse_simulation(value: str, *, source: str = SIMULATE_VARIABLE) -> Simulation:
    """``<simulator>:<arch>`` -> `Simulation`; anything else is an `EnvironmentValueError`
    (a usage error, exit 2) naming the bad part and what is accepted. The simulator's
    module, if it needs one, must import."""
    simulator, sep, arch = value.strip().partition(":")
    expected = ", ".join(f"{s}:{a}" for s in sorted(SIMULATORS) for a in SIMULATED_ARCHS)
    if not sep:
        raise EnvironmentValueError(f"{source}={value!r}: expected one of {expected}")
    if simulator not in SIMULATORS:
        raise EnvironmentValueError(
            f"{source}={value!r}: unknown simulation kind {simulator!r} "
            f"(kinds: {', '.join(sorted(SIMULATORS))}); expected one of {expected}"
        )
    if arch not in SIMULATED_ARCHS:
        raise EnvironmentValueError(
            f"{source}={value!r}: unknown arch {arch!r} for {simulator} "
            f"(archs: {', '.join(SIMULATED_ARCHS)}); expected one of {expected}"
        )
    module = SIMULATORS[simulator]
    if module is not None and importlib.util.find_spec(module) is None:
        raise EnvironmentValueError(
            f"{source}={value!r}: {simulator} needs the {module!r} package, which is not "
            f"installed here (pip install {module}, or use an engine venv: scripts/engine.py)"
        )
    return Simulation(simulator, arch)


def simulation_from_environment(environ: Mapping[str, str]) -> Simulation | None:
    """The simulation ``QHARNESS_SIMULATE`` asks for; None when unset or empty."""
    value = environ.get(SIMULATE_VARIABLE, "")
    return parse_simulation(value) if value.strip() else None


def key_of(device: str, arch: str, simulated: str | None) -> str:
    """`harness.platform.info.platform_key` from its fields (results files hold them too):
    ``<simulator>-<arch>`` under simulation, else "cpu" or the GPU arch."""
    if simulated:
        return f"{simulated}-{arch}"
    return "cpu" if device == "cpu" else arch


def simulation_environment(simulation: Simulation) -> dict[str, str]:
    """Variables a process (the pytest child of ``harness run``) needs to simulate."""
    env = {SIMULATE_VARIABLE: simulation.value}
    if simulation.simulator == TRITON_INTERPRET:
        env[INTERPRET_VARIABLE] = "1"
    return env


def dispatch_key(device: str, arch: str, simulated: str | None) -> str:
    """The row of a native dispatch table a platform reads: under a simulation whose torch
    kernels stand for the arch (`TORCH_KERNELS_AS_ARCH`) the arch's own row, else `key_of`."""
    if simulated in TORCH_KERNELS_AS_ARCH:
        return arch
    return key_of(device, arch, simulated)


def not_the_simulated_arch(path: str, simulated: str, arch: str) -> str:
    """Why torch's own native paths do not run on a simulated platform (their skip reason)."""
    return (
        f"{path}: on a simulated platform ({simulated}:{arch}) torch's kernels are the CPU's, "
        f"not {arch}'s; only Triton kernel source (engine adapters) runs as {arch}"
    )


# What a test ran on a simulated platform: its record's ``execution`` value (docs/CLI.md;
# harness.paths.execution decides it), each with the words the matrix and summary show.
INTERPRETED = "interpreted-kernel"
CPU_CODE = "cpu-code"
NOT_RUN = "not-run"
EXECUTIONS: dict[str, str] = {
    INTERPRETED: "GPU kernel source, interpreted",
    CPU_CODE: "CPU code under the arch's expectations",
    NOT_RUN: "nothing ran",
}
