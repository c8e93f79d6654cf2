"""A writer SIGKILLed at any step: ``reports/latest`` and ``latest.json`` still name the
same run, and the temp files it left are removed by the next writer (never a live one's).

The kill is real: a child process runs the step under test with each file-system step
(`os.fsync`, `os.replace`, `os.symlink`, `os.rename`) wrapped so that the k-th one SIGKILLs
the child just before it happens; k runs over every step the write takes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.report.reading.rundir import RunDir, create_run_dir, resolve_latest, update_latest
from harness.store.atomic import write_text_atomic
from harness.store.tempfiles import STALE_AFTER_S, host_tag, temp_name
from tests.hang_guard import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[2]

# Runs ``CALL`` (python source, with ``target`` bound to argv[1]) and SIGKILLs itself just
# before file-system step number argv[2] (0: never); prints the number of steps it took.
CHILD = """
import os, signal, sys
from pathlib import Path

target, kill_at = Path(sys.argv[1]), int(sys.argv[2])
steps = 0


def killed_before(fn):
    def step(*args, **kwargs):
        global steps
        steps += 1
        if steps == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return step


for name in ("fsync", "replace", "symlink", "rename"):
    setattr(os, name, killed_before(getattr(os, name)))
{call}
print(steps)
"""


def _child(call: str, target: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(call=call), str(target), str(kill_at)],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip


def _start(call: str, target: Path, kill_at: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD.format(call=call), str(target), str(kill_at)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _steps(call: str, target: Path) -> int:
    done = _child(call, target, 0)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def _run(reports: Path, run_id: str, payload: str) -> RunDir:
    run = RunDir(reports / run_id)
    run.path.mkdir(parents=True)
    run.results.write_text(json.dumps({"run": payload}))
    return run


def _temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name.endswith(".tmp"))


def _latest_agrees(reports: Path) -> str:
    """The run both pointers name; fails when they name different runs."""
    latest = resolve_latest(reports)
    assert latest is not None
    assert latest.results.is_file()
    named = latest.results.read_bytes()
    assert (reports / "latest.json").read_bytes() == named, "latest.json names another run"
    return str(json.loads(named)["run"])


MOVE_LATEST = (
    "from harness.report.reading.rundir import RunDir, update_latest\n"
    "update_latest(target, RunDir(target / 'new'))"
)


def _old_layout(reports: Path) -> None:
    """What earlier versions left: ``latest`` a symlink, ``latest.json`` a plain copy."""
    old = _run(reports, "old", "old")
    os.symlink("old", reports / "latest")
    (reports / "latest.json").write_bytes(old.results.read_bytes())
    _run(reports, "new", "new")


@pytest.mark.parametrize("layout", ["copy", "link"], ids=["from-copy", "from-link"])
def test_latest_and_latest_json_agree_after_a_kill_at_every_step(
    tmp_path: Path, layout: str
) -> None:
    """Reported: a SIGKILL right after `latest` moved left latest.json on the previous run."""
    probe = tmp_path / "probe"
    probe.mkdir()
    _old_layout(probe)
    if layout == "link":  # as this version leaves it after a first run
        update_latest(probe, RunDir(probe / "old"))
    total = _steps(MOVE_LATEST, probe)
    assert total >= 2
    killed = {}
    for kill_at in range(1, total + 1):
        reports = tmp_path / f"kill-{kill_at}"
        reports.mkdir()
        _old_layout(reports)
        if layout == "link":
            update_latest(reports, RunDir(reports / "old"))
        killed[kill_at] = _start(MOVE_LATEST, reports, kill_at)  # side by side: each starts torch
    for kill_at, child in killed.items():
        reports = tmp_path / f"kill-{kill_at}"
        _, err = child.communicate(timeout=HANG_GUARD_S)
        assert child.returncode == -signal.SIGKILL, (kill_at, err)
        assert _latest_agrees(reports) in ("old", "new"), kill_at
        # the next run's move finishes the job and leaves no temp file behind
        update_latest(reports, RunDir(reports / "new"))
        assert _latest_agrees(reports) == "new"
        assert _temps(reports) == [], kill_at


WRITE = "from harness.store.atomic import write_text_atomic\nwrite_text_atomic(target, 'new')"


def test_a_killed_atomic_write_leaves_no_temp_file_after_the_next_write(tmp_path: Path) -> None:
    """Reported: killed atomic writes left `.tmp` files forever."""
    total = _steps(WRITE, tmp_path / "probe.json")
    for kill_at in range(1, total + 1):
        folder = tmp_path / f"kill-{kill_at}"
        folder.mkdir()
        target = folder / "results.json"
        target.write_text("old")
        done = _child(WRITE, target, kill_at)
        assert done.returncode == -signal.SIGKILL
        assert target.read_text() == "old"
        assert _temps(folder), "the kill left no temp file: the probe tests nothing"
        write_text_atomic(folder / "other.json", "new")  # the next writer
        assert _temps(folder) == [], kill_at


def test_a_killed_run_directory_write_is_swept_when_the_next_run_starts(tmp_path: Path) -> None:
    """A run killed while writing its results is never written again: the next run's
    directory creation sweeps it (and ``repro/``)."""
    reports = tmp_path / "reports"
    (reports / "20261201T0300Z-cpu-aaaa" / "repro").mkdir(parents=True)
    for where in ("20261201T0300Z-cpu-aaaa/results.json", "20261201T0300Z-cpu-aaaa/repro/b"):
        target = reports / where
        done = _child(WRITE, target, 1)  # killed at its fsync: the temp file is written
        assert done.returncode == -signal.SIGKILL
    assert len(_temps(reports)) == 2
    create_run_dir(reports, "20261202T0300Z-cpu-aaaa")
    assert _temps(reports) == []


def test_a_live_writers_temp_file_is_never_removed(tmp_path: Path) -> None:
    """Only a dead owner's temp files go: a concurrent writer's (a live pid on this host),
    another host's recent one and a file that only looks like a temp stay."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".results.json.{host_tag()}-{sleeper.pid}.abcd1234.tmp"
        other_host = "0000" if host_tag() != "0000" else "ffff"
        remote = tmp_path / f".results.json.{other_host}-1.abcd1234.tmp"
        user_file = tmp_path / ".notes.tmp"
        for path in (live, remote, user_file):
            path.write_text("partial")
        write_text_atomic(tmp_path / "results.json", "new")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [live.name, remote.name, user_file.name, "results.json"]
        )
    finally:
        sleeper.kill()
        sleeper.wait()


def test_another_hosts_temp_file_goes_once_it_is_a_day_old(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A temp file whose owner cannot be asked (another host on a shared file system) is
    removed once older than any write takes, and the removal is said on stderr."""
    other_host = "0000" if host_tag() != "0000" else "ffff"
    remote = tmp_path / f".results.json.{other_host}-1.abcd1234.tmp"
    recent_remote = tmp_path / f".summary.md.{other_host}-2.abcd1234.tmp"
    for path in (remote, recent_remote):
        path.write_text("partial")
    old = time.time() - STALE_AFTER_S - 60
    os.utime(remote, (old, old))
    write_text_atomic(tmp_path / "results.json", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == [recent_remote.name, "results.json"]
    assert f"removed {remote}" in capsys.readouterr().err


def test_old_files_without_an_owner_stamp_are_never_swept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reported: the sweep deleted a user's day-old files (and directories, with everything
    in them) whose names merely had the shape earlier versions used for temp files."""
    user_file = tmp_path / ".latest.json.k3j_x9qa.tmp"
    pid_shaped = tmp_path / ".notes.12345.tmp"
    user_dir = tmp_path / ".staging-abcdefgh"
    user_dir.mkdir()
    (user_dir / "thesis.tex").write_text("years of work")
    for path in (user_file, pid_shaped):
        path.write_text("mine")
    old = time.time() - 30 * STALE_AFTER_S
    for path in (user_file, pid_shaped, user_dir):
        os.utime(path, (old, old))
    write_text_atomic(tmp_path / "results.json", "new")
    create_run_dir(tmp_path, "20261202T0300Z-cpu-aaaa")  # the reports/ sweep
    assert (user_dir / "thesis.tex").read_text() == "years of work"
    assert user_file.read_text() == "mine"
    assert pid_shaped.read_text() == "mine"
    assert "removed" not in capsys.readouterr().err


def test_own_temp_names_name_their_owner() -> None:
    name = temp_name("latest")
    assert name.startswith(f".latest.{host_tag()}-{os.getpid()}.")
    assert name.endswith(".tmp")


ADD_RUN = (
    "from harness.report.reading.runs import add_runs, open_history\n"
    "add_runs(open_history(target.parent / 'history'), [target])"
)


def test_a_killed_history_add_leaves_a_staging_the_next_add_removes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reported: a killed `history add` left its staging directory behind. It must never be
    read as a run (reports go on) and the next add removes it."""
    from harness import cli
    from tests.fleet.night import record, results_doc, write_run

    first = write_run(
        tmp_path, "20261201T0300Z-gfx942-a1b2",
        results_doc("gfx942", "2026-12-01T03:00:00Z", [record("fp8_per_tensor", "native")]),
    )  # fmt: skip
    history = tmp_path / "history"
    done = _child(ADD_RUN, first, 1)  # killed just before the staging is renamed into place
    assert done.returncode == -signal.SIGKILL, done.stderr
    staged = [p.name for p in history.iterdir()]
    assert len(staged) == 1, staged
    assert staged[0].startswith("."), staged  # the staging, nothing else

    assert cli.main(["history", "list", "--history", str(history)]) == 0
    assert capsys.readouterr().out == ""  # the staging is no run
    assert cli.main(["report", str(first), "--history", str(history)]) == 0
    capsys.readouterr()

    second = write_run(
        tmp_path, "20261202T0300Z-gfx942-a1b2",
        results_doc("gfx942", "2026-12-02T03:00:00Z", [record("fp8_per_tensor", "native")]),
    )  # fmt: skip
    assert cli.main(["history", "add", str(first), str(second), "--history", str(history)]) == 0
    assert sorted(p.name for p in history.iterdir()) == [
        "run=20261201T0300Z-gfx942-a1b2",
        "run=20261202T0300Z-gfx942-a1b2",
    ]
    assert cli.main(["report", str(second), "--history", str(history)]) == 0


def test_a_killed_model_build_leaves_a_staging_the_next_build_removes(tmp_path: Path) -> None:
    """The checkpoint cache builds into a staging folder too (`harness.models.cache`)."""
    from harness.models.cache import _build

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    staging = tmp_path / f".tiny-float-abc.{host_tag()}-{dead.stdout.strip()}.k3j_x9qa.tmp"
    staging.mkdir()
    (staging / "model.safetensors").write_bytes(b"half")

    built = _build(
        tmp_path / "tiny-float-def", lambda folder: (folder / "config.json").write_text("{}")
    )

    assert sorted(p.name for p in tmp_path.iterdir()) == [built.name]
