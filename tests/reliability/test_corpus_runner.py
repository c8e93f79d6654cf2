"""scripts/corpus.py against a stand-in engine: caught, missed and broken are told apart, the
control decides, and the engine's venv is never written, even when the runner is killed.

The stand-in is a real venv (made without pip, seeing this interpreter's packages through a
.pth) holding one small package; its checks are a pytest file of their own, named to the
runner by a stage table (``--stages``), so the real engines are not needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "corpus.py"

PACKAGE = """\
def scale(x):
    return x * 2


def third(x):
    return x / 2  # the bug a "present" entry's control fixes


def unused(x):
    return x


def half(x):
    return x / 4  # a bug the checks already know (a strict xfail)
"""

CHECKS = '''\
import os, time
import pytest
import standin_pkg


@pytest.mark.xfail(strict=True, reason="a known finding: half divides by 4")
def test_known_half():
    assert standin_pkg.half(4) == 2


def test_scale():
    assert standin_pkg.scale(3) == 6


def test_third():
    assert standin_pkg.third(6) == 2


def test_wait_for_signal():
    """Blocks until the runner is gone (its pytest is then killed with it)."""
    open(os.environ["STANDIN_STARTED"], "w").close()
    end = time.monotonic() + float(os.environ["STANDIN_GUARD_S"])
    while time.monotonic() < end:
        time.sleep(0.05)
    raise AssertionError("the runner's signal never came")
'''


def diff(old: str, new: str, path: str = "standin_pkg/__init__.py") -> str:
    """A -p1 unified diff replacing one line of the stand-in package."""
    lines = PACKAGE.splitlines()
    at = lines.index(old)
    return f"--- a/{path}\n+++ b/{path}\n@@ -{at + 1},1 +{at + 1},1 @@\n-{old}\n+{new}\n"


ENTRY = """\
id = "{id}"
project = "vllm"
upstream = "example/standin#1"
fix = ""
date = "2026-01-01"
bug_class = "scale-rounding"
wrong = "a stand-in fault"
file = "standin_pkg/__init__.py"
function = "scale"
kind = "{kind}"
stage = "standin"
keyword = "{keyword}"
runnable = true
"""


def add_entry(corpus: Path, ident: str, kind: str, keyword: str, **files: str) -> None:
    folder = corpus / ident
    folder.mkdir(parents=True)
    (folder / "entry.toml").write_text(ENTRY.format(id=ident, kind=kind, keyword=keyword))
    for name, text in files.items():
        (folder / name.replace("_", ".", 1)).write_text(text)


@pytest.fixture
def standin(tmp_path: Path) -> dict[str, Path]:
    """A stand-in engine venv, its checks, a corpus of one entry per outcome."""
    env_dir = tmp_path / "engines" / "standin"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    # this interpreter's packages (pytest, the harness), wherever its venv finds them
    (site / "qharness-base.pth").write_text(
        "".join(p + "\n" for p in sys.path if p.endswith("site-packages"))
    )
    (site / "standin_pkg").mkdir()
    (site / "standin_pkg" / "__init__.py").write_text(PACKAGE)
    checks = tmp_path / "checks" / "test_standin.py"
    checks.parent.mkdir()
    checks.write_text(CHECKS)
    stages = tmp_path / "stages.json"
    stages.write_text(json.dumps({"standin": {"venv": "standin", "files": [str(checks)]}}))
    corpus = tmp_path / "corpus"
    add_entry(
        corpus,
        "standin-caught",
        "revert",
        "scale",
        fault_patch=diff("    return x * 2", "    return x * 3"),
    )
    add_entry(
        corpus,
        "standin-missed",
        "revert",
        "scale",
        fault_patch=diff("    return x", "    return -x"),
    )
    add_entry(
        corpus,
        "standin-broken",
        "revert",
        "scale",
        fault_patch=diff("    return x * 2", "    return x * 3").replace("x * 2", "x * 5"),
    )
    add_entry(
        corpus,
        "standin-present",
        "present",
        "third",
        control_patch=diff(
            '    return x / 2  # the bug a "present" entry\'s control fixes', "    return x / 3"
        ),
    )
    add_entry(
        corpus,
        "standin-known",
        "present",
        "known_half",
        control_patch=diff(
            "    return x / 4  # a bug the checks already know (a strict xfail)",
            "    return x / 2",
        ),
    )
    add_entry(
        corpus,
        "standin-monkeypatch",
        "port",
        "scale",
        fault_py=(
            'TARGET = "standin_pkg"\n\n\ndef apply(module):\n    module.scale = lambda x: x * 4\n'
        ),
    )
    add_entry(
        corpus,
        "standin-hang",
        "revert",
        "wait_for_signal",
        fault_patch=diff("    return x * 2", "    return x * 3"),
    )
    return {"root": tmp_path, "site": site, "stages": stages, "corpus": corpus}


def tree_digest(folder: Path) -> str:
    """Every file's path and bytes under ``folder``: any write into it changes this."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def runner(standin: dict[str, Path], *args: str) -> list[str]:
    root = standin["root"]
    return [
        sys.executable,
        str(SCRIPT),
        "--corpus",
        str(standin["corpus"]),
        "--engines",
        str(root / "engines"),
        "--scratch",
        str(root / "scratch"),
        "--stages",
        str(standin["stages"]),
        *args,
    ]


def test_outcomes_are_told_apart_and_the_venv_is_untouched(standin: dict[str, Path]) -> None:
    before = tree_digest(standin["site"])
    out = standin["root"] / "run"
    ids = [
        "standin-caught",
        "standin-missed",
        "standin-broken",
        "standin-present",
        "standin-monkeypatch",
        "standin-known",
    ]
    done = subprocess.run(
        runner(standin, "run", *ids, "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # one entry is broken
    results = {r["id"]: r for r in json.loads((out / "results.json").read_text())["entries"]}
    outcome = {k: r["outcome"] for k, r in results.items()}
    assert outcome == {
        "standin-caught": "caught",
        "standin-missed": "missed",
        "standin-broken": "broken",
        "standin-present": "caught",
        "standin-monkeypatch": "caught",
        "standin-known": "caught",
    }
    assert [module_tail(c) for c in results["standin-known"]["catching"]] == [
        "test_standin::test_known_half: known finding (xfail), cleared by the control"
    ]
    assert [module_tail(c).split(": ")[0] for c in results["standin-caught"]["catching"]] == [
        "test_standin::test_scale"
    ]
    assert "does not apply" in results["standin-broken"]["reason"]
    assert "every check passed" in results["standin-missed"]["reason"]
    assert tree_digest(standin["site"]) == before


def module_tail(ident: str) -> str:
    """A junit test id with its module's dotted prefix cut to the module's own name: the
    prefix follows pytest's rootdir, which for the stand-in's files outside the repository
    depends on the machine (the checks folder here, a parent of it elsewhere)."""
    module, sep, rest = ident.partition("::")
    return module.rsplit(".", 1)[-1] + sep + rest


def test_a_present_entry_whose_fix_fails_is_broken(standin: dict[str, Path]) -> None:
    control = standin["corpus"] / "standin-present" / "control.patch"
    control.write_text(control.read_text().replace("x / 3", "x / 4"))
    out = standin["root"] / "run"
    subprocess.run(
        runner(standin, "run", "standin-present", "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    (result,) = json.loads((out / "results.json").read_text())["entries"]
    assert result["outcome"] == "broken"
    assert result["reason"].startswith("control")


def test_a_bad_entry_is_one_line_and_exit_2(standin: dict[str, Path]) -> None:
    entry = standin["corpus"] / "standin-caught" / "entry.toml"
    entry.write_text(entry.read_text().replace('kind = "revert"', 'kind = "guess"'))
    done = subprocess.run(
        runner(standin, "run", "standin-caught"),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "kind not one of" in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_a_killed_runner_leaves_the_engine_intact(standin: dict[str, Path], signum: int) -> None:
    before = tree_digest(standin["site"])
    started = standin["root"] / "started"
    env = {**os.environ, "STANDIN_STARTED": str(started), "STANDIN_GUARD_S": str(HANG_GUARD_S)}
    out = standin["root"] / "run"
    proc = subprocess.Popen(
        runner(standin, "run", "standin-hang", "--out", str(out)),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    end = time.monotonic() + HANG_GUARD_S
    while not started.exists() and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert started.exists(), proc.communicate()
    proc.send_signal(signum)
    proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == (-signal.SIGKILL if signum == signal.SIGKILL else 130)
    # the pytest run dies with its runner (SIGKILL included): no orphan holds the overlay
    end = time.monotonic() + HANG_GUARD_S
    while still_running(standin) and time.monotonic() < end:
        time.sleep(0.1)
    assert not still_running(standin)
    assert tree_digest(standin["site"]) == before
    # and the next run clears what was left and works
    done = subprocess.run(
        runner(standin, "run", "standin-caught", "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (standin["root"] / "scratch" / "slot-0" / "overlay").exists()
    assert tree_digest(standin["site"]) == before


def still_running(standin: dict[str, Path]) -> bool:
    """Whether a pytest of this stand-in's checks is still alive."""
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return any("pytest" in line and str(standin["root"]) in line for line in listing.splitlines())


def test_a_fix_that_clears_one_of_several_findings_catches() -> None:
    """A case that xfails on both sides, naming fewer known findings on the control, was
    caught by the finding the fix cleared; the same findings on both sides catch nothing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "corpus_script", Path(__file__).resolve().parents[2] / "scripts" / "corpus.py"
    )
    assert spec is not None
    assert spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["corpus_script"] = corpus
    spec.loader.exec_module(corpus)
    test = "suites.test_quantizers::test_quantizer_on_mx_edge_cases[q-e4m3fn-rceil]"
    assert corpus.finding_named("known finding: A + B | 3/9 tiles differ") == "A + B"
    assert corpus.finding_named("some other reason") == ""

    def run(label: str, named: str) -> object:
        return corpus.RunResult(label, 0, 1.0, xfailed=[test], findings={test: named})

    outcome, _, catching = corpus.judge([run("fault", "A + B")], [run("control", "B")])
    assert outcome == "caught"
    assert catching == [
        f"{test}: known finding (xfail), 1 of its 2 findings cleared by the control"
    ]
    outcome, _, _ = corpus.judge([run("fault", "A + B")], [run("control", "A + B")])
    assert outcome == "missed"


def test_an_egg_info_advertising_other_entry_points_is_named(tmp_path: Path) -> None:
    """Metadata on PYTHONPATH wins over the venv's: an egg-info left by an older install
    (other entry points than the pyproject) is refused, naming it; a current one is not."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("corpus_script_meta", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    sys.modules["corpus_script_meta"] = corpus
    spec.loader.exec_module(corpus)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "a"\n[project.scripts]\na = "a.cli:main"\n'
        '[project.entry-points."qharness.paths"]\nnew_path = "a.paths:New"\n'
    )
    egg = tmp_path / "a.egg-info"
    egg.mkdir()
    current = "[console_scripts]\na = a.cli:main\n\n[qharness.paths]\nnew_path = a.paths:New\n"
    (egg / "entry_points.txt").write_text(current)
    assert corpus.stale_metadata(tmp_path) == []
    (egg / "entry_points.txt").write_text(current.replace("new_path", "old_path"))
    (problem,) = corpus.stale_metadata(tmp_path)
    assert str(egg) in problem
    assert "reinstall" in problem
