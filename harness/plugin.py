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
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import pytest

from harness.errors import EnvironmentValueError

if TYPE_CHECKING:
    from harness.core.checks import CheckResult
    from harness.memory.tracker import PeakMeasurement
    from harness.platform.info import PlatformInfo
    from harness.store.golden import GoldenStore

RECORD_KEY = "qharness"
CASE_KEY = "qharness_case"
ACTIVE_INI = "qharness"
GOLDEN_INI = "qharness_golden"
# Case fields a test may give through record_result(...) when it has no case parameter: they
# go to the record's top level (the matrix reads them there), not only into its metrics.
CASE_FIELDS = ("suite", "scheme", "path", "shape")
_PLUGIN_NAMES = frozenset({"qharness", "harness.plugin"})

# Fixture types, for the suites' signatures.
RecordResult = Callable[..., None]
MeasureMemory = Callable[[], AbstractContextManager["PeakMeasurement"]]


class RecordChecks(Protocol):
    """The ``record_checks`` fixture's signature."""

    def __call__(self, checks: Iterable[CheckResult], known_finding: str | None = None) -> None: ...


def xfail_known(record_result: RecordResult, finding: str, detail: str) -> NoReturn:
    """End the case as an xfail for a documented engine finding it reproduces
    (`harness.paths.base.known_finding`): the finding is recorded on the case, so the
    report counts and lists it, and ``detail`` says what happened this time."""
    record_result(known_finding=finding)
    pytest.xfail(f"known finding: {finding} | {detail}")


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


GPU_LIST_VARIABLE = "QHARNESS_GPUS"  # parsed by harness.platform.devices
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def pin_worker_gpu(environ: MutableMapping[str, str]) -> str | None:
    """Give xdist worker gwN the N-th (round robin) GPU of ``QHARNESS_GPUS="0,1,..."``.

    Runs in the worker's pytest_configure, before any test touches the device, so each
    worker sees one GPU (CUDA and ROCm read the same ordinal from both variables).
    """
    from harness.platform.devices import gpu_list_from_environment  # torch: import when asked

    gpus = gpu_list_from_environment(environ)  # EnvironmentValueError for abc, -1, ...
    worker = re.fullmatch(r"gw(\d+)", environ.get("PYTEST_XDIST_WORKER", ""))
    if not gpus or worker is None:
        return None
    gpu = gpus[int(worker.group(1)) % len(gpus)]
    for name in VISIBILITY_VARIABLES:
        environ[name] = gpu
    return gpu


# pytest-benchmark's default storage, which it creates in the working directory at start-up
# even when nothing is saved; options that do save or compare use it.
BENCHMARK_DEFAULT_STORAGE = "file://./.benchmarks"
BENCHMARK_STORAGE_USERS = ("benchmark_save", "benchmark_autosave", "benchmark_compare")


def keep_benchmark_storage_unmade(config: pytest.Config) -> bool:
    """While qharness is inert, stop pytest-benchmark (installed as qharness's dependency)
    from making ``.benchmarks/`` in the project: if no option saves or compares, its storage
    is pointed at the working directory itself, which exists and is never written. Runs
    before pytest-benchmark's own (trylast) configure. Returns whether it did."""
    option = config.option
    if getattr(option, "benchmark_storage", None) != BENCHMARK_DEFAULT_STORAGE:
        return False
    if any(getattr(option, name, None) for name in BENCHMARK_STORAGE_USERS):
        return False
    option.benchmark_storage = "file://."
    return True


def pytest_configure(config: pytest.Config) -> None:
    if not is_active(config):
        keep_benchmark_storage_unmade(config)
        return
    config.pluginmanager.register(ActiveHooks(), "qharness-active")
    from harness.platform.devices import gpu_list_from_environment
    from harness.platform.threads import share_cores_among_workers

    try:
        if hasattr(config, "workerinput"):
            pin_worker_gpu(os.environ)
            share_cores_among_workers(os.environ)
        else:
            gpu_list_from_environment(os.environ)  # refused before any worker starts
            from harness.platform.runner import runner_label

            runner_label(os.environ)  # QHARNESS_RUNNER: refused now, not when writing results
    except EnvironmentValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):  # workers ship reports to the controller
        config.pluginmanager.register(ResultRecorder(config), "qharness-recorder")
        config.pluginmanager.register(JsonProperties(), "qharness-junit-json")


def stop_gracefully_on_signals(session: pytest.Session) -> None:
    """SIGTERM (a CI job cancelled) or Ctrl-C: let the running test finish, then end the
    session, so every finished test is recorded and the results file is written, marked
    partial. A second signal interrupts at once (a hung test), as Ctrl-C always did."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, frame: Any) -> None:
        if session.shouldstop:
            raise KeyboardInterrupt(f"signal {signum}")
        session.shouldstop = f"signal {signum}: stopping after the running test"

    for signum in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, stop)


# ------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def qh_platform() -> PlatformInfo:
    """The detected platform (`harness.platform.info.PlatformInfo`)."""
    from harness.platform.info import detect

    return detect()


@pytest.fixture(scope="session")
def golden_store(pytestconfig: pytest.Config) -> GoldenStore:
    """The golden store (`harness.store.golden.GoldenStore`), read-only during tests."""
    from harness.store.golden import GoldenStore

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


# ----------------------------------------------------------------- repro bundles
REPRO_KEY = pytest.StashKey[dict[str, Any]]()


@pytest.fixture
def repro_case(request: pytest.FixtureRequest) -> Callable[..., None]:
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


def write_repro_bundle(item: pytest.Item, report: pytest.TestReport) -> None:
    """On a failed call, write the kept tensors of ``item`` as a bundle (if asked for)."""
    directory = item.config.getoption("--qharness-repro")
    kept = item.stash.get(REPRO_KEY, None)
    if not directory or not kept or not report.failed or report.when != "call":
        return
    import torch

    from harness.platform.info import detect
    from harness.store.repro import Bundle, write_bundle

    props = dict(item.user_properties)
    meta = {
        "kind": kept["kind"],
        "case": props.get(CASE_KEY, {}),
        "metrics": props.get(RECORD_KEY, {}),
        "failure": _failure_message(report),
        "platform": detect().to_json(),
        "versions": {"torch": torch.__version__},
    }
    write_bundle(Path(directory), item.nodeid, Bundle(kept["tensors"], meta))


@pytest.fixture
def record_checks(record_result: RecordResult) -> RecordChecks:
    """``record_checks(results)`` records each `CheckResult`'s metrics and every verdict
    under ``checks`` (``{name: "pass" | "fail: ..." | "n/a: ..."}``, in run order), then
    fails the test naming every failed check. Call it again with more results to add them
    (a gate: checks whose failure makes the rest meaningless are recorded first).

    ``known_finding``: the write-up of a documented engine finding this case reproduces
    (`harness.paths.base.known_finding`); failed checks are then recorded with it and the
    test is an xfail, counted and reported, instead of a failure. Checks that pass pass."""
    from harness.core.checks import failure_summary, verdicts

    seen: dict[str, str] = {}

    def record(checks: Iterable[CheckResult], known_finding: str | None = None) -> None:
        results = list(checks)
        for result in results:
            record_result(**result.metrics)
        seen.update(verdicts(results))
        record_result(checks=dict(seen))
        summary = failure_summary(results)
        if summary is not None and known_finding is not None:
            xfail_known(record_result, known_finding, summary)
        if summary is not None:
            pytest.fail(summary, pytrace=False)

    return record


# ------------------------------------------------------------------ peak memory
@pytest.fixture
def measure_memory(qh_platform: PlatformInfo, record_result: RecordResult) -> MeasureMemory:
    """``with measure_memory() as m: ...`` measures peak bytes (`harness.memory.measure_peak`)
    and records ``peak_bytes`` (and the method) in this test's result record."""
    from contextlib import contextmanager

    import torch

    from harness.core.fastcodec import decode_fast, encode_fast
    from harness.core.formats import FORMATS, decode, encode
    from harness.memory.tracker import measure_peak

    # Codec tables are built once per process on first use; build them now so a test's peak
    # does not depend on which test ran first in its worker.
    device = torch.device(qh_platform.torch_device)
    for fmt in FORMATS.values():
        decode(encode(torch.ones(1), fmt), fmt)
        decode_fast(encode_fast(torch.ones(1, device=device), fmt), fmt)

    @contextmanager
    def measure() -> Iterator[PeakMeasurement]:
        with measure_peak(qh_platform) as measurement:
            yield measurement
        record_result(**measurement.record_fields())

    return measure


# -------------------------------------------------------------------- recording
class JsonDict(dict[str, Any]):
    """A record's properties whose text form is JSON: JUnit XML writes ``str(value)`` of
    each user property, which for a plain dict is a Python repr no tool can read."""

    def __str__(self) -> str:
        import json

        return json.dumps(self, sort_keys=True, default=str)


class JsonProperties:
    """Registered on the controller only (an xdist worker must ship plain dicts): before
    JUnit XML reads them, this test's qharness properties become `JsonDict`s."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        report.user_properties = [
            (name, JsonDict(value) if name in (RECORD_KEY, CASE_KEY) and isinstance(value, dict)
             else value)
            for name, value in report.user_properties
        ]  # fmt: skip


class ActiveHooks:
    """Hooks registered only when qharness is active: case fields and the header."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Attach the case's fields (if its parameter provides them) to every report."""
        callspec = getattr(item, "callspec", None)
        fields: dict[str, Any] = {}
        if callspec is not None:
            for value in callspec.params.values():
                describe = getattr(value, "record_fields", None)
                if callable(describe):
                    fields.update(describe())
        item.user_properties.append((CASE_KEY, fields))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        write_repro_bundle(item, report)
        return report

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from harness.platform.info import detect

        info = detect()
        return [
            f"qharness: platform {info.device}/{info.arch} ({info.name}), "
            f"torch {info.torch_version}"
        ]


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _failure_message(report: pytest.TestReport | pytest.CollectReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return str(message if message is not None else report.longrepr).strip()[:2000]


class ResultRecorder:
    """Collects one record per test on the controller and writes the results file."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        existing = self.records.get(report.nodeid)
        if report.when == "teardown":
            if report.failed and existing is not None:
                existing["outcome"] = "error"
                existing["reason"] = _failure_message(report)
            return
        if report.when == "setup" and report.passed:
            return
        outcome: str
        if report.when == "call":
            expected_failure = hasattr(report, "wasxfail")
            if expected_failure and report.skipped:
                outcome = "xfailed"
            elif expected_failure and report.passed:
                outcome = "xpassed"  # non-strict xfail that passed; strict ones are failures
            else:
                outcome = report.outcome
        else:
            outcome = "skipped" if report.skipped else "error"
        props: dict[str, Any] = dict(report.user_properties)
        reason = None
        if outcome == "skipped":
            reason = _skip_reason(report)
        elif outcome in ("failed", "error"):
            reason = _failure_message(report)
        metrics = props.get(RECORD_KEY, {})
        case = dict(props.get(CASE_KEY, {}))
        for name in CASE_FIELDS:  # record_result(scheme=..., path=...) reaches the matrix
            if case.get(name) is None and isinstance(metrics.get(name), str):
                case[name] = metrics[name]
        self.records[report.nodeid] = {
            "nodeid": report.nodeid,
            **case,
            "outcome": outcome,
            "reason": reason,
            "duration_s": round(report.duration, 6),
            "metrics": metrics,
        }

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped at collection (``pytest.skip(allow_module_level=True)``,
        ``importorskip``) or broken there has no test reports: record it once, under the
        module's node id, so the skip is counted with its reason and the error is seen.
        Under xdist the controller gets each such report (deduplicated) from the workers."""
        if report.passed or report.nodeid in self.records:
            return
        skipped = bool(report.skipped)
        self.records[report.nodeid] = {
            "nodeid": report.nodeid,
            "outcome": "skipped" if skipped else "error",
            "reason": _skip_reason(report) if skipped else _failure_message(report),
            "duration_s": 0.0,
            "metrics": {},
        }

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        stop_gracefully_on_signals(session)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        path = self.config.getoption("--qharness-results")
        if path is None:
            return
        from harness.report.results import write_results

        write_results(Path(path), list(self.records.values()), exitstatus=int(exitstatus))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        skipped = Counter(r["reason"] for r in self.records.values() if r["outcome"] == "skipped")
        if skipped:
            terminalreporter.section("qharness: skips by reason")
            for reason, count in skipped.most_common():
                terminalreporter.write_line(f"{count:5d}  {reason}")
        path = self.config.getoption("--qharness-results")
        if path:
            terminalreporter.write_line(f"qharness results: {path}")
