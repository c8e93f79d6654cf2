"""Golden refresh is all-or-nothing: a process killed (``os._exit``, no cleanup) after any
step of the commit leaves a store that the next open makes wholly old or wholly new; a
concurrent refresh is refused; an orphan-only refresh works; files are byte-reproducible."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from reliability_helpers import NEW_BUILDERS, OLD_BUILDERS, make_store, tree_fingerprint

from harness.store.golden_errors import GoldenStoreBusyError
from harness.store.golden_format import JOURNAL_NAME, serialize
from harness.store.golden_journal import store_lock
from harness.store.golden_registry import GoldenData
from harness.store.golden_store import GoldenStore

KILLED = 71


def _state(root: Path) -> dict[str, str]:
    """What the store holds, ignoring provenance timestamps: each manifest entry's sha256 and
    each golden file's bytes (as sha256)."""
    import hashlib

    manifest = json.loads((root / "MANIFEST.json").read_text())
    state = {f"manifest:{e}": r["sha256"] for e, r in manifest["entries"].items()}
    for path in sorted(root.rglob("*.safetensors")):
        rel = path.relative_to(root).as_posix()
        state[f"file:{rel}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def _in_child_dying_at(step: int, run: Callable[[Callable[[str], None]], object]) -> int:
    """``run(hook)`` in a forked child whose ``hook`` kills it (``os._exit``, no cleanup, as
    SIGKILL would) on its ``step``-th call; the child's exit status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            calls = 0

            def hook(name: str) -> None:
                nonlocal calls
                calls += 1
                if calls == step:
                    os._exit(KILLED)

            run(hook)
            os._exit(0)
        except BaseException:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _refresh_killed_at(root: Path, step: int) -> int:
    """Refresh to NEW_BUILDERS in a child that dies after commit step ``step``."""
    return _in_child_dying_at(
        step,
        lambda hook: GoldenStore(root, NEW_BUILDERS, on_commit_step=hook).refresh(
            log=lambda _: None
        ),
    )


def _commit_steps(tmp_path: Path) -> list[str]:
    root = tmp_path / "count"
    make_store(root)
    steps: list[str] = []
    GoldenStore(root, NEW_BUILDERS, on_commit_step=steps.append).refresh(log=lambda _: None)
    return steps


def test_kill_after_every_commit_step_leaves_the_store_wholly_old_or_new(tmp_path: Path) -> None:
    steps = _commit_steps(tmp_path)
    assert "committed" in steps, steps
    assert len(steps) >= 10, steps  # journal, install, manifest, removal: every kind of step
    old_root, new_root = tmp_path / "old", tmp_path / "new"
    make_store(old_root)
    shutil.copytree(old_root, new_root)
    GoldenStore(new_root, NEW_BUILDERS).refresh(log=lambda _: None)
    old, new = _state(old_root), _state(new_root)
    assert old != new
    outcomes = []
    for step in range(1, len(steps) + 1):
        root = tmp_path / f"kill{step}"
        shutil.copytree(old_root, root)
        assert _refresh_killed_at(root, step) == KILLED, f"child did not die at step {step}"
        # Whoever opens the store next finishes or undoes the refresh.
        reopened_old = GoldenStore(root, OLD_BUILDERS)
        reopened_old.manifest()
        assert not (root / JOURNAL_NAME).exists()
        state = _state(root)
        assert state in (old, new), f"killed after {steps[step - 1]!r}: store is mixed"
        builders = OLD_BUILDERS if state == old else NEW_BUILDERS
        assert GoldenStore(root, builders).check() == [], f"after {steps[step - 1]!r}"
        outcomes.append("new" if state == new else "old")
    committed = steps.index("committed")
    # Before the commit point the old store survives; from it on, the new one wins.
    assert outcomes == ["old"] * committed + ["new"] * (len(steps) - committed)


def test_kill_during_roll_forward_is_rolled_forward_again(tmp_path: Path) -> None:
    steps = _commit_steps(tmp_path)
    committed = steps.index("committed") + 1
    old_root, new_root = tmp_path / "old", tmp_path / "new"
    make_store(old_root)
    shutil.copytree(old_root, new_root)
    GoldenStore(new_root, NEW_BUILDERS).refresh(log=lambda _: None)
    new = _state(new_root)
    for second in range(1, len(steps) - committed + 1):
        root = tmp_path / f"twice{second}"
        shutil.copytree(old_root, root)
        assert _refresh_killed_at(root, committed) == KILLED
        status = _in_child_dying_at(
            second,
            lambda hook, root=root: GoldenStore(root, NEW_BUILDERS, on_commit_step=hook).manifest(),
        )
        assert status == KILLED
        GoldenStore(root, NEW_BUILDERS).manifest()
        assert _state(root) == new


def test_concurrent_refresh_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    make_store(tmp_path)
    before = tree_fingerprint(tmp_path)
    busy = pytest.raises(GoldenStoreBusyError, match="another process is refreshing")
    with store_lock(tmp_path, purpose="test"), busy:
        GoldenStore(tmp_path, NEW_BUILDERS).refresh(log=lambda _: None)
    assert tree_fingerprint(tmp_path) == before


def test_two_processes_refreshing_at_once_never_interleave(tmp_path: Path) -> None:
    make_store(tmp_path)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # a refresh that signals once it holds the lock, then commits slowly
        try:
            os.close(read_end)

            def slow(name: str) -> None:
                if name == "journal created":
                    os.write(write_end, b"x")
                time.sleep(0.05)

            GoldenStore(tmp_path, NEW_BUILDERS, on_commit_step=slow).refresh(log=lambda _: None)
            os._exit(0)
        except BaseException:
            os._exit(99)
    os.close(write_end)
    assert os.read(read_end, 1) == b"x"  # the child is inside its commit
    os.close(read_end)
    with pytest.raises(GoldenStoreBusyError):
        GoldenStore(tmp_path, NEW_BUILDERS).refresh(log=lambda _: None)
    with pytest.raises(GoldenStoreBusyError):  # a reader does not see a half-applied journal
        GoldenStore(tmp_path, NEW_BUILDERS).load("suite/a")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert GoldenStore(tmp_path, NEW_BUILDERS).check() == []


def test_refresh_that_only_removes_orphans_works(tmp_path: Path) -> None:
    """Reported: a refresh whose only change was removing entries crashed."""
    make_store(tmp_path)
    fewer = {k: v for k, v in OLD_BUILDERS.items() if k != "other/c"}
    changes = GoldenStore(tmp_path, fewer).refresh(log=lambda _: None)
    assert sorted((c.entry, c.status) for c in changes) == [
        ("other/c", "removed"),
        ("suite/a", "unchanged"),
        ("suite/b", "unchanged"),
    ]
    assert not (tmp_path / "other" / "c.safetensors").exists()
    assert GoldenStore(tmp_path, fewer).check() == []


def test_golden_bytes_are_the_same_in_another_process() -> None:
    """safetensors orders metadata by a per-process hash; with one key the bytes agree."""
    code = (
        "import sys, torch\n"
        "from harness.store.golden_format import serialize\n"
        "from harness.store.golden_registry import GoldenData\n"
        "d = GoldenData(exact={'z': torch.arange(6, dtype=torch.uint8), 'a': torch.ones(2)},\n"
        "               reference={'m': torch.linspace(0, 1, 5), 'b': torch.zeros(3)})\n"
        "sys.stdout.write(serialize(d).hex())\n"
    )
    import torch

    here = serialize(
        GoldenData(
            exact={"z": torch.arange(6, dtype=torch.uint8), "a": torch.ones(2)},
            reference={"m": torch.linspace(0, 1, 5), "b": torch.zeros(3)},
        )
    ).hex()
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert there == here
