"""Rules the harness code keeps, checked on its source so a regression fails here.

- No decision by name prefix or suffix (`startswith`/`endswith`): a prefix test once sent
  w_mxfp4_a_mxfp6_* schemes to a kernel that only ran pure w_mxfp4. Use explicit tables.
- No LAPACK-backed ops in references (`torch.linalg`, `svd`, `qr`, `inverse`, ...): a
  reference once needed a CPU LAPACK that the ROCm wheel does not ship.
- No `is_cuda()`-style gating: ROCm must take the same path (`is_cuda_alike`).
- Engine adapters (`integrations/`) import qharness only through its front door
  (`from harness import ...`): deep modules may move, the names in `harness.__all__` may not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
SOURCES = sorted(HARNESS.rglob("*.py"))
INTEGRATIONS = HARNESS.parent / "integrations"
ADAPTER_SOURCES = sorted(p for p in INTEGRATIONS.rglob("*.py") if "tests" not in p.parts)

FORBIDDEN_METHODS = {"startswith", "endswith"}
LAPACK_NAMES = {"linalg", "svd", "qr", "inverse", "pinverse", "cholesky", "lstsq", "eig", "det"}
CUDA_ONLY_NAMES = {"is_cuda"}


def violations(source: str, label: str) -> list[str]:
    """Every rule broken in ``source``, as "label:line: what"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        where = f"{label}:{node.lineno}"
        if node.attr in FORBIDDEN_METHODS:
            found.append(f"{where}: .{node.attr}() decides by name prefix/suffix")
        if node.attr in LAPACK_NAMES and ast.unparse(node.value) == "torch":
            found.append(f"{where}: torch.{node.attr} needs LAPACK")
        if node.attr in CUDA_ONLY_NAMES:
            found.append(f"{where}: .{node.attr} excludes ROCm; use is_cuda_alike")
    return found


def test_sources_were_found() -> None:
    assert len(SOURCES) > 20


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(HARNESS.parent)))
def test_harness_source_keeps_the_rules(path: Path) -> None:
    assert violations(path.read_text(), str(path.relative_to(HARNESS.parent))) == []


def test_the_rule_checker_finds_each_kind_of_violation() -> None:
    sample = (
        "import torch\n"
        "if name.startswith('w_mxfp4'):\n    pass\n"
        "torch.linalg.solve(a, b)\n"
        "torch.inverse(a)\n"
        "if t.is_cuda:\n    pass\n"
    )
    text = "\n".join(violations(sample, "sample.py"))
    assert "sample.py:2: .startswith() decides by name prefix/suffix" in text
    assert "sample.py:4: torch.linalg needs LAPACK" in text
    assert "sample.py:5: torch.inverse needs LAPACK" in text
    assert "sample.py:6: .is_cuda excludes ROCm" in text


def deep_imports(source: str, label: str) -> list[str]:
    """Every import of a harness module other than the front door, as "label:line: what"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [
            f"{label}:{node.lineno}: imports {name}; import from the front door `harness`"
            for name in names
            if name.split(".")[0] == "harness" and name != "harness"
        ]
    return found


def test_adapter_sources_were_found() -> None:
    assert {p.parent.parent.name for p in ADAPTER_SOURCES} >= {"torchao", "quark", "vllm"}


@pytest.mark.parametrize(
    "path", ADAPTER_SOURCES, ids=lambda p: str(p.relative_to(INTEGRATIONS.parent))
)
def test_adapters_import_only_the_front_door(path: Path) -> None:
    assert deep_imports(path.read_text(), str(path.relative_to(INTEGRATIONS.parent))) == []


def test_the_front_door_rule_finds_deep_imports() -> None:
    sample = (
        "from harness import Support\n"
        "import harness\n"
        "from harness.paths.base import Numerics\n"
        "import harness.core.formats as formats\n"
        "from harnessy import x\n"
    )
    text = "\n".join(deep_imports(sample, "a.py"))
    assert "a.py:3: imports harness.paths.base" in text
    assert "a.py:4: imports harness.core.formats" in text
    assert len(deep_imports(sample, "a.py")) == 2


# ------------------------------------------------- no test depends on the machine's speed
TEST_SOURCES = sorted(
    p
    for root in (HARNESS.parent / "tests", INTEGRATIONS)
    for p in root.rglob("*.py")
    if root.name == "tests" or "tests" in p.parts
)


def literal_time_limits(source: str, label: str) -> list[str]:
    """Every ``timeout=<number>`` in ``source``: a fixed limit on a child turns a loaded
    runner into a red test (tests/hang_guard.py is the one limit, a hang guard)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        literal = isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant)
        if literal and node.arg == "timeout" and node.value.value is not None:
            found.append(f"{label}:{node.value.lineno}: timeout={node.value.value!r}")
    return found


def test_no_test_puts_a_fixed_time_limit_on_a_child() -> None:
    assert len(TEST_SOURCES) > 50
    found = [
        v
        for p in TEST_SOURCES
        for v in literal_time_limits(p.read_text(), str(p.relative_to(HARNESS.parent)))
    ]
    assert found == [], "use tests.hang_guard.HANG_GUARD_S:\n" + "\n".join(found)


def test_the_time_limit_rule_finds_a_literal_limit() -> None:
    sample = "subprocess.run(cmd, timeout=600)\nchild.wait(timeout=HANG_GUARD_S)\n"
    assert literal_time_limits(sample, "s") == ["s:1: timeout=600"]


# --- the real-bug corpus stays independent of what it measures ---------------------------

ROOT = HARNESS.parent
CORPUS = ROOT / "corpus"
# what the corpus measures: the library, the suites, the adapters and the self-tests (but
# the corpus runner's own, and this rule's)
CORPUS_TOOLING = {
    ROOT / "tests" / "reliability" / "test_corpus_runner.py",
    Path(__file__).resolve(),
}
MEASURED = sorted(
    p
    for folder in ("harness", "suites", "integrations", "tests")
    for p in (ROOT / folder).rglob("*")
    if p.suffix in {".py", ".toml", ".json", ".md"}
    and "findings" not in p.parts
    and p.resolve() not in CORPUS_TOOLING
)


def corpus_names(corpus: Path, keys: tuple[str, ...] = ("id",)) -> set[str]:
    """Every entry's ``keys`` values: its id, or its upstream references (``owner/repo#N``)."""
    names: set[str] = set()
    for entry in sorted(corpus.glob("*/entry.toml")):
        # top-level `key = "value"` lines (read without tomllib, which Python 3.10 lacks)
        found = re.findall(r'^(\w+)\s*=\s*"([^"]*)"', entry.read_text(), re.M)
        names |= {value for key, value in found if key in keys} - {""}
    return names


UPSTREAM_KEYS = ("upstream", "fix")


def corpus_violations(sources: list[Path], corpus: Path) -> list[str]:
    """Sources that read corpus/ or name an entry. An entry's id may appear nowhere; its
    upstream reference not in the suites, where inputs and checks live (an adapter's known
    finding or a declared convention cites upstream as its evidence, which is allowed)."""
    ids, upstream = corpus_names(corpus), corpus_names(corpus, UPSTREAM_KEYS)
    found = []
    for path in sources:
        text = path.read_text(errors="replace")
        if re.search(r"""["'/]corpus\b|\bcorpus/""", text):
            found.append(f"{path}: reads corpus/")
        named = ids | (upstream if "suites" in path.parts else set())
        found += [f"{path}: names {name!r}" for name in sorted(named) if name in text]
    return found


def test_nothing_measured_reads_or_names_the_corpus() -> None:
    """A miss is closed by a class of input or check, never by a case shaped after an
    entry: the harness, suites, adapters and self-tests neither read corpus/ nor name its
    entries."""
    assert MEASURED
    assert corpus_violations(MEASURED, CORPUS) == []


def test_the_corpus_rule_finds_a_reader_and_a_named_entry(tmp_path: Path) -> None:
    entry = tmp_path / "corpus" / "vllm-some-bug"
    entry.mkdir(parents=True)
    (entry / "entry.toml").write_text(
        'id = "vllm-some-bug"\nupstream = "vllm-project/vllm#1"\nfix = ""\n'
    )
    reader = tmp_path / "reader.py"
    reader.write_text('ENTRIES = Path("corpus") / "x"\n')
    named = tmp_path / "named.py"
    named.write_text("def test_vllm_some_bug_case():  # vllm-some-bug\n    pass\n")
    suite = tmp_path / "suites" / "test_cases.py"
    suite.parent.mkdir()
    suite.write_text("CASES = ['vllm-project/vllm#1']\n")
    finding = tmp_path / "adapter.py"
    finding.write_text("REASON = 'a known finding: upstream vllm-project/vllm#1'\n")
    clean = tmp_path / "clean.py"
    clean.write_text("def test_scale():\n    pass\n")
    found = corpus_violations([reader, named, suite, finding, clean], tmp_path / "corpus")
    assert found == [
        f"{reader}: reads corpus/",
        f"{named}: names 'vllm-some-bug'",
        f"{suite}: names 'vllm-project/vllm#1'",
    ]
