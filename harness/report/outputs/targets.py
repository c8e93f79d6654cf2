"""Where a file named on the command line may be written: one policy for every output.

`report --out/--html/--summary` and `run --out` used to rename a temp file over whatever
sat at the path: a FIFO or a device became a regular file (as root, ``--out /dev/null``
replaced the machine's /dev/null), and one output silently won over another run's file or
over another output of the same command. `output_writer` decides, for each output:

- a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a pipe): written as a stream;
- a directory, or a path below a file: refused (usage error);
- a file of a run directory (results, junit, benchmark, reports, repro bundles) that is
  not a report of one of this command's own runs: refused, never replaced;
- a file another output of the same command names: refused, so neither silently wins;
- anything else: written atomically (`harness.store.atomic`); through a symlink, its
  target is replaced, never the link (``/dev/stdout`` redirected to a file stays a link).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from harness.errors import FileSystemError, UsageError
from harness.report.reading.rundir import RunDir
from harness.store.atomic import write_bytes_atomic

Writer = Callable[[Path, bytes], None]

_PROBE = RunDir(Path("."))
# A run directory's own files: never replaced by another command's output.
RUN_FILES = frozenset(
    p.name for p in (_PROBE.results, _PROBE.junit, _PROBE.benchmark, _PROBE.summary, _PROBE.html)
)
# The ones `report` may rewrite for a run it reports (docs/CI.md: a report with history).
REPORT_FILES = frozenset({_PROBE.summary.name, _PROBE.html.name})


def _stream(path: Path, data: bytes) -> None:
    """Write into an existing device or FIFO as it is: never create, rename or truncate.
    A FIFO whose reader leaves before all is written is one line naming it (exit 4), not
    the silent status of a closed stdout."""
    try:
        fd = os.open(path, os.O_WRONLY)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BrokenPipeError:
        raise FileSystemError(
            f"{path}: its reader went away before the output was written (broken pipe); "
            "keep a reader on it until the command ends, or name a file"
        ) from None
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


STREAM_MODES: dict[str, Callable[[int], bool]] = {
    "character device": stat.S_ISCHR,
    "FIFO": stat.S_ISFIFO,
}


def _is_stream(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode  # through links: /dev/stdout names the real target
    except OSError:
        return False
    return any(test(mode) for test in STREAM_MODES.values())


def _check_place(flag: str, path: Path) -> None:
    """A directory, or a path whose nearest existing parent is not a directory: refused."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file name")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{flag} {path}: {parent} is not a directory")
            return


def _is_run_dir(directory: Path) -> bool:
    """What every run leaves: its results and pytest's junit file (a folder holding only a
    results.json, such as an earlier ``run --out`` copy's, is no run)."""
    return all((directory / p.name).is_file() for p in (_PROBE.results, _PROBE.junit))


def run_dir_of(path: Path) -> Path | None:
    """The run directory whose own file ``path`` is (results, junit, reports, bundles)."""
    real = Path(os.path.realpath(path))
    parent = real.parent
    if real.name in RUN_FILES and _is_run_dir(parent):
        return parent
    if parent.name == _PROBE.repro.name and _is_run_dir(parent.parent):
        return parent.parent
    return None


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links
    except OSError:
        return False


def output_writer(
    flag: str,
    path: Path,
    others: Mapping[str, Path] | None = None,
    own_runs: Iterable[Path] = (),
) -> Writer:
    """How to write the output ``flag`` names at ``path`` (see the module doc); raises a
    one-line `UsageError` where it may not be written. ``others``: the command's other
    outputs; ``own_runs``: run directories whose reports this command may rewrite."""
    if _is_stream(path):
        return _stream
    _check_place(flag, path)
    for other_flag, other in (others or {}).items():
        if other_flag != flag and _same_file(path, other):
            raise UsageError(f"{flag} and {other_flag} both name {path}; give each its own file")
    run = run_dir_of(path)
    owned = {os.path.realpath(r) for r in own_runs}
    if run is not None and not (path.name in REPORT_FILES and str(run) in owned):
        raise UsageError(
            f"{flag} {path}: refusing to replace a file of the run directory {run}; "
            "name another file"
        )
    real = Path(os.path.realpath(path))
    if real != Path(os.path.abspath(path)):  # a link: replacing it would leave its target
        return lambda _, data: write_bytes_atomic(real, data)
    return write_bytes_atomic


class Outputs:
    """The files one command writes, checked together before the command does any work."""

    def __init__(self, named: Mapping[str, Path | None], own_runs: Iterable[Path] = ()) -> None:
        self.paths = {flag: Path(p) for flag, p in named.items() if p is not None}
        self.own_runs = tuple(own_runs)
        for flag in self.paths:
            self.writer(flag)

    def writer(self, flag: str) -> Writer:
        """`output_writer` for ``flag`` among this command's outputs, asked afresh."""
        return output_writer(flag, self.paths[flag], self.paths, self.own_runs)

    def is_stream(self, flag: str) -> bool:
        return self.writer(flag) is _stream

    def write(self, flag: str, data: bytes | str) -> Path:
        """Write ``data`` to the output ``flag`` names; returns its path."""
        path = self.paths[flag]
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self.writer(flag)(path, raw)
        return path
