"""qharness from another project: the worked example in examples/own_kernel passes from a
fresh directory against the shipped goldens (and a broken kernel there fails), its
record_result case fields reach the record's top level, the golden directory can be set in
the ini file, a missing entry never suggests refreshing the installed copy, the goldens'
tensor names are documented, and qharness, inert or opted into, leaves no .benchmarks/
behind."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.store.golden_store import GoldenStore
from harness.store.locations import golden_root
from tests.conftest import REPO_ROOT
from tests.hang_guard import HANG_GUARD_S

EXAMPLE = REPO_ROOT / "examples" / "own_kernel"


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args],
        cwd=project, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project)
    return project


def test_worked_example_passes_from_another_project(tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = _pytest(project, "--qharness-results", "results.json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert not (project / "golden").exists()  # the shipped goldens were used
    records = json.loads((project / "results.json").read_text())["records"]
    assert len(records) == 3
    for r in records:
        assert (r["suite"], r["scheme"], r["path"]) == ("linear", "fp8_per_tensor", "my_fp8_linear")
        assert set(r["metrics"]["checks"].values()) == {"pass"}


def test_a_broken_kernel_fails_the_worked_example(tmp_path: Path) -> None:
    project = _project(tmp_path)
    source = project / "test_my_kernel.py"
    text = source.read_text()
    assert "        y = y + layer.bias.float()\n" in text
    source.write_text(text.replace("        y = y + layer.bias.float()\n", "        pass\n"))
    done = _pytest(project)
    assert done.returncode == 1
    assert "vs_golden" in done.stdout


def test_golden_dir_from_the_ini_file_and_an_honest_missing_entry_hint(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "mystore").mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\nqharness = true\nqharness_golden = mystore\n")
    (project / "test_store.py").write_text(
        "import pytest\n"
        "from harness.store.golden import GoldenError\n\n"
        "def test_store(golden_store):\n"
        "    assert golden_store.root.name == 'mystore'\n"
        "    with pytest.raises(GoldenError, match='--root') as err:\n"
        "        golden_store.load('linear/fp8_per_tensor')\n"
        "    print('HINT', err.value)\n"
    )
    done = _pytest(project, "-s")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "mystore" in done.stdout


@pytest.mark.parametrize("ini", ["", "[pytest]\nqharness = true\n"], ids=["inert", "opted_in"])
def test_qharness_leaves_no_benchmarks_directory(tmp_path: Path, ini: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    if ini:
        (project / "pytest.ini").write_text(ini)
    done = _pytest(project)
    assert done.returncode == 0, done.stdout
    assert not (project / ".benchmarks").exists()


def test_every_golden_tensor_name_is_documented() -> None:
    doc = (REPO_ROOT / "docs" / "OWN-KERNEL.md").read_text()
    store = GoldenStore(golden_root())
    missing = set()
    for entry in store.manifest()["entries"]:
        for name in store.load(entry).tensors:
            leaf = re.sub(r"^(\d+x\d+x\d+|e\d+k\d+)\.(t\d+\.)?", "", name)
            leaf = re.sub(r"^shard\d+\.", "", leaf)
            leaf = re.sub(r"^(floor|rceil|even|ceil)\.", "", leaf)
            leaf = re.sub(r"^(renorm|norenorm)\.", "", leaf)
            if leaf not in doc:
                missing.add(f"{entry.split('/')[0]}: {name}")
    assert not missing, sorted(missing)
