"""The qharness pytest plugin (entry point ``pytest11: qharness``).

Gives suites their fixtures (platform, golden store, result recording), records one result
per test (case fields, outcome, skip reason, metrics) and writes them, merged across
pytest-xdist workers, to the results file named by ``--qharness-results``. Skips are
counted by reason in the terminal summary, so nothing is skipped unseen.

Installed packages' ``pytest11`` plugins load into every pytest run of the environment, so
this one is inert unless asked for: it records, prints its header and summary, and pins
GPUs only when the project opts in (`is_active`): ini ``qharness = true``, ``--qharness``,
``--qharness-results``, or ``-p qharness``/``-p harness.plugin``. Otherwise it only adds
its options and fixtures; a test that uses ``record_result``, ``record_checks`` or
``measure_memory`` opts that test in. Nothing here imports torch until a fixture or an
active hook needs it.

The parts live in `harness.pytest_plugin`: the recorder, GPU pinning, the verdict policy
and the fixture types; this module keeps the options, the activation rule and the fixtures
(their names are a contract), and re-exports the names suites and tests import from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.errors import EnvironmentValueError
from harness.pytest_plugin.fixture_types import (
    MeasureMemory,
    RecordChecks,
    RecordResult,
    ReproCase,
)
from harness.pytest_plugin.goldens import golden_failures, load_golden
from harness.pytest_plugin.pinning import (
    GPU_LIST_VARIABLE,
    VISIBILITY_VARIABLES,
    pin_worker_gpu,
)
from harness.pytest_plugin.recorder import (
    CASE_KEY,
    RECORD_KEY,
    REPRO_KEY,
    ActiveHooks,
    JsonProperties,
    ResultRecorder,
    stop_gracefully_on_signals,
    write_repro_bundle,
)
from harness.pytest_plugin.verdicts import checks_recorder, xfail_known
from harness.pytest_plugin.xdist_status import StatusOnce

if TYPE_CHECKING:
    from harness.memory.tracker import PeakMeasurement
    from harness.platform.info import PlatformInfo
    from harness.store.golden_store import GoldenStore

__all__ = [
    "CASE_KEY",
    "GPU_LIST_VARIABLE",
    "RECORD_KEY",
    "REPRO_KEY",
    "VISIBILITY_VARIABLES",
    "ActiveHooks",
    "MeasureMemory",
    "RecordChecks",
    "RecordResult",
    "ReproCase",
    "ResultRecorder",
    "golden_failures",
    "is_active",
    "load_golden",
    "pin_worker_gpu",
    "stop_gracefully_on_signals",
    "write_repro_bundle",
    "xfail_known",
]

ACTIVE_INI = "qharness"
GOLDEN_INI = "qharness_golden"
_PLUGIN_NAMES = frozenset({"qharness", "harness.plugin"})


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("qharness", "quantized-inference correctness harness")
    group.addoption(
        "--qharness",
        action="store_true",
        default=False,
        help="activate qharness recording, header and skip summary in this run",
    )
    group.addoption(
        "--qharness-results",
        metavar="PATH",
        default=None,
        help="write one JSON record per test (merged across xdist workers) to PATH "
        "(activates qharness)",
    )
    group.addoption(
        "--qharness-repro",
        metavar="DIR",
        default=None,
        help="write a repro bundle of each failing numeric check into DIR",
    )
    group.addoption(
        "--qharness-golden",
        metavar="DIR",
        default=None,
        help="golden store directory (default: ini qharness_golden, else <rootdir>/golden if it "
        "holds a MANIFEST.json, else the goldens shipped with qharness)",
    )
    parser.addini(
        GOLDEN_INI,
        type="string",
        default="",
        help="golden store directory, relative to the ini file (default: the shipped goldens)",
    )
    parser.addini(
        ACTIVE_INI,
        type="bool",
        default=False,
        help="activate the qharness plugin (recording, header, skip summary) for this project",
    )


def is_active(config: pytest.Config) -> bool:
    """Whether this run asked for qharness (see the module docstring for the ways)."""
    requested = set(getattr(config.known_args_namespace, "plugins", None) or ())
    return bool(
        config.getini(ACTIVE_INI)
        or config.getoption("--qharness")
        or config.getoption("--qharness-results")
        or requested & _PLUGIN_NAMES
    )


# pytest-benchmark's default storage, which it creates in the working directory at start-up
# even when nothing is saved; options that do save or compare use it.
BENCHMARK_DEFAULT_STORAGE = "file://./.benchmarks"
BENCHMARK_STORAGE_USERS = ("benchmark_save", "benchmark_autosave", "benchmark_compare")


def keep_benchmark_storage_unmade(config: pytest.Config) -> bool:
    """Stop pytest-benchmark (installed as qharness's dependency) from making
    ``.benchmarks/`` in the project, whether qharness is inert or opted into: if no option
    saves or compares, its storage is pointed at the working directory itself, which exists
    and is never written. Runs before pytest-benchmark's own (trylast) configure. Returns
    whether it did."""
    option = config.option
    if getattr(option, "benchmark_storage", None) != BENCHMARK_DEFAULT_STORAGE:
        return False
    if any(getattr(option, name, None) for name in BENCHMARK_STORAGE_USERS):
        return False
    option.benchmark_storage = "file://."
    return True


def pytest_configure(config: pytest.Config) -> None:
    keep_benchmark_storage_unmade(config)
    if not is_active(config):
        return
    config.pluginmanager.register(ActiveHooks(), "qharness-active")
    from harness.platform.devices import gpu_list_from_environment
    from harness.platform.simulate import simulation_environment, simulation_from_environment
    from harness.platform.threads import share_cores_among_workers
    from harness.process import watch_parent

    try:
        if hasattr(config, "workerinput"):
            pin_worker_gpu(os.environ)
            share_cores_among_workers(os.environ)
        else:
            gpu_list_from_environment(os.environ)  # refused before any worker starts
            watch_parent(os.environ)  # end with the CLI that started us, even on SIGKILL
        simulation = simulation_from_environment(os.environ)
        if simulation is not None:  # before any kernel module imports triton.jit
            os.environ.update(simulation_environment(simulation))
            from harness.platform.runner import runner_label

            runner_label(os.environ)  # QHARNESS_RUNNER: refused now, not when writing results
    except EnvironmentValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):  # workers ship reports to the controller
        config.pluginmanager.register(ResultRecorder(config), "qharness-recorder")
        config.pluginmanager.register(JsonProperties(), "qharness-junit-json")
        config.pluginmanager.register(StatusOnce(), "qharness-xdist-status")


# ------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def qh_platform() -> PlatformInfo:
    """The detected platform (`harness.platform.info.PlatformInfo`)."""
    from harness.platform.info import detect

    return detect()


@pytest.fixture(scope="session")
def golden_store(pytestconfig: pytest.Config) -> GoldenStore:
    """The golden store (`harness.store.golden.GoldenStore`), read-only during tests."""
    from harness.store.golden_store import GoldenStore

    return GoldenStore(golden_dir(pytestconfig))


def golden_dir(config: pytest.Config) -> Path:
    """``--qharness-golden``, else ini ``qharness_golden`` (relative to the ini file), else
    ``<rootdir>/golden`` when it is a golden store (has a MANIFEST.json), else the goldens
    shipped with qharness (the checkout's ``golden/`` or the wheel's copy)."""
    from harness.store.locations import golden_root

    option = config.getoption("--qharness-golden")
    if option:
        return Path(option)
    ini = str(config.getini(GOLDEN_INI) or "").strip()
    if ini:
        base = config.inipath.parent if config.inipath else config.rootpath
        return base / ini
    local = config.rootpath / "golden"
    return local if (local / "MANIFEST.json").is_file() else golden_root()


@pytest.fixture
def record_result(request: pytest.FixtureRequest) -> RecordResult:
    """Call ``record_result(name=value, ...)`` to put metrics in this test's result record."""
    metrics: dict[str, Any] = {}
    request.node.user_properties.append((RECORD_KEY, metrics))

    def record(**values: Any) -> None:
        metrics.update(values)

    return record


@pytest.fixture
def repro_case(request: pytest.FixtureRequest) -> ReproCase:
    """``repro_case(kind, tensor=..., ...)`` keeps this case's tensors; if the test then
    fails and ``--qharness-repro DIR`` is set, they are written as a repro bundle
    (`harness.store.repro`) that ``python -m harness repro`` re-runs. ``kind`` names the
    re-runner (``linear``)."""
    kept: dict[str, Any] = {}
    request.node.stash[REPRO_KEY] = kept

    def keep(kind: str, **tensors: Any) -> None:
        kept["kind"] = kind
        kept.setdefault("tensors", {}).update(tensors)

    return keep


@pytest.fixture
def record_checks(record_result: RecordResult) -> RecordChecks:
    """``record_checks(results)`` records each `CheckResult`'s metrics and every verdict
    under ``checks`` (``{name: "pass" | "fail: ..." | "n/a: ..."}``, in run order), then
    fails the test naming every failed check. Call it again with more results to add them
    (a gate: checks whose failure makes the rest meaningless are recorded first).

    ``known_finding``: the write-up of a documented engine finding this case reproduces
    (`harness.paths.base.known_finding`); failed checks are then recorded with it and the
    test is an xfail, counted and reported, instead of a failure. Checks that pass pass."""
    return checks_recorder(record_result)


# ------------------------------------------------------------------ peak memory
@pytest.fixture
def measure_memory(qh_platform: PlatformInfo, record_result: RecordResult) -> MeasureMemory:
    """``with measure_memory() as m: ...`` measures peak bytes (`harness.memory.measure_peak`)
    and records ``peak_bytes`` (and the method) in this test's result record."""
    from contextlib import contextmanager

    import torch

    from harness.core.fastcodec import decode_fast, encode_fast
    from harness.core.formats import FORMATS, decode, encode
    from harness.memory.tracker import PeakMeasurement, measure_peak, peak_not_meaningful

    # Codec tables are built once per process on first use; build them now so a test's peak
    # does not depend on which test ran first in its worker.
    device = torch.device(qh_platform.torch_device)
    for fmt in FORMATS.values():
        decode(encode(torch.ones(1), fmt), fmt)
        decode_fast(encode_fast(torch.ones(1, device=device), fmt), fmt)

    @contextmanager
    def measure() -> Iterator[PeakMeasurement]:
        if qh_platform.simulated:  # the test runs; only its peak is not measured
            record_result(peak_skipped=peak_not_meaningful(qh_platform))
            yield PeakMeasurement("not_measured", qh_platform.device)
            return
        with measure_peak(qh_platform) as measurement:
            yield measurement
        record_result(**measurement.record_fields())

    return measure
