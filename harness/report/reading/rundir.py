"""The run directory `reports/<run-id>/` and the `reports/latest` pointer.

A run id is the UTC minute, the platform key and a short host tag
(``20261201T0300Z-gfx942-a1b2``), so runs from several runners sort by time and never
collide. Each run directory holds the files named in `RunDir`; `latest` is a symlink to the
newest (or, where symlinks are unavailable, a one-line file naming it), and
``latest.json`` its results for scripts written against older versions: a symlink to
``latest/results.json``, so the two can never name different runs (`update_latest`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import QHarnessError
from harness.platform.simulate import key_of
from harness.report.reading.limits import path_problem
from harness.store.atomic import point_symlink_atomic, write_bytes_atomic, write_text_atomic
from harness.store.tempfiles import sweep_stale

RESULTS_NAME = "results.json"
LATEST_LINK = "latest"
LATEST_JSON = "latest.json"


class RunDirError(QHarnessError):
    """A path given as a run is neither a run directory nor a results file."""


def platform_key(platform: dict[str, Any]) -> str:
    """The platform's short name in run ids and report columns: ``cpu``, the GPU arch, or
    ``triton-interpret-<arch>`` for a simulated one (its own platform, never merged)."""
    device = str(platform.get("device", "unknown"))
    simulated = platform.get("simulated")
    return key_of(
        device, str(platform.get("arch") or device), str(simulated) if simulated else None
    )


def host_tag(hostname: str | None = None) -> str:
    """Four hex digits naming the host without revealing its name."""
    name = hostname if hostname is not None else socket.gethostname()
    return hashlib.sha256(name.encode()).hexdigest()[:4]


def new_run_id(platform: dict[str, Any], now: _dt.datetime | None = None) -> str:
    moment = now or _dt.datetime.now(_dt.timezone.utc)
    return f"{moment:%Y%m%dT%H%MZ}-{platform_key(platform)}-{host_tag()}"


@dataclass(frozen=True)
class RunDir:
    """The files of one run."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def results(self) -> Path:
        return self.path / RESULTS_NAME

    @property
    def junit(self) -> Path:
        return self.path / "junit.xml"

    @property
    def benchmark(self) -> Path:
        return self.path / "benchmark.json"

    @property
    def summary(self) -> Path:
        return self.path / "summary.md"

    @property
    def html(self) -> Path:
        return self.path / "report.html"

    @property
    def repro(self) -> Path:
        return self.path / "repro"


def create_run_dir(reports: Path, run_id: str) -> RunDir:
    """Make ``reports/<run_id>`` (``-2``, ``-3``... if that minute's id is taken). First,
    the temp files killed runs left in ``reports/`` and its run directories are removed."""
    reports.mkdir(parents=True, exist_ok=True)
    sweep_reports(reports)
    for n in range(1, 1000):
        candidate = reports / (run_id if n == 1 else f"{run_id}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return RunDir(candidate)
    raise RunDirError(f"{reports}: too many runs named {run_id}")


def sweep_reports(reports: Path) -> None:
    """Remove dead writers' temp files (`harness.store.tempfiles`) from ``reports/``, each
    run directory and its ``repro/``: a run killed while writing is never written again."""
    sweep_stale(reports)
    try:
        runs = [e for e in os.scandir(reports) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for entry in runs:
        sweep_stale(Path(entry.path))
        sweep_stale(Path(entry.path) / "repro")


# What ``latest.json`` links to: whatever ``latest`` names, so one rename moves both.
LATEST_JSON_TARGET = f"{LATEST_LINK}/{RESULTS_NAME}"


def update_latest(reports: Path, run: RunDir) -> None:
    """Point ``reports/latest`` at ``run``; ``latest.json`` follows it.

    ``latest.json`` is a symlink to ``latest/results.json``, made (over an older copy)
    before ``latest`` moves, so the one atomic replace of ``latest`` moves both and a kill
    at any point leaves them naming the same run. Where symlinks are unavailable ``latest``
    is a one-line file and ``latest.json`` a copy written after it: ``latest`` is then the
    one to trust (`resolve_latest`), and the next run rewrites the copy."""
    link = reports / LATEST_LINK
    json_link = reports / LATEST_JSON
    try:
        if not _links_to(json_link, LATEST_JSON_TARGET):
            point_symlink_atomic(json_link, LATEST_JSON_TARGET)
        point_symlink_atomic(link, run.run_id)
        return
    except OSError:
        pass
    write_text_atomic(link, run.run_id + "\n")
    if run.results.is_file():
        write_bytes_atomic(json_link, run.results.read_bytes())


def _links_to(link: Path, target: str) -> bool:
    try:
        return os.readlink(link) == target
    except OSError:
        return False


def resolve_latest(reports: Path) -> RunDir | None:
    """The run ``reports/latest`` names, if any."""
    link = reports / LATEST_LINK
    if link.is_symlink() or link.is_dir():
        return RunDir(reports / os.readlink(link)) if link.is_symlink() else RunDir(link)
    if link.is_file():
        return RunDir(reports / link.read_text().strip())
    return None


def results_path(run: Path) -> Path:
    """A run given as its directory or as a results file -> the results file; a path that
    no report or run id can name (not UTF-8) is a `RunDirError`."""
    run = Path(run)
    unnamed = path_problem(run)
    if unnamed:
        raise RunDirError(f"run {unnamed}")
    if run.is_dir():
        return RunDir(run).results
    return run


def run_id_of(results: Path) -> str:
    """The run id of a results file: its run directory's name, or the file's stem."""
    results = Path(results)
    return results.parent.name if results.name == RESULTS_NAME else results.stem
