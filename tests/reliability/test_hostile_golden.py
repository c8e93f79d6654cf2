"""Hostile and careless golden stores: every one is one clear error naming the file and the
field, raised before any file is touched (the tree hashes the same before and after)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_helpers import OLD_BUILDERS, assert_clear_error, make_store, tree_fingerprint

from harness.errors import EXIT_USAGE, QHarnessError
from harness.store.golden_store import GoldenStore

PROBES = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ENTRY = "suite/a"
SHA = "0" * 64

# Entry names that would leave the store, or hide in it.
escaping_names = st.one_of(
    st.sampled_from(
        [
            "../../x",
            "../x",
            "/etc/passwd",
            "/tmp/x",
            "suite/../../x",
            ".hidden/x",
            "suite/./a",
            "a\\..\\b",
            "",
            "suite//a",
            "~/x",
            "a/..",
        ]
    ),
    st.builds(
        lambda d, n: "../" * d + n, st.integers(1, 6), st.from_regex(r"[a-z]{1,8}", fullmatch=True)
    ),
    st.builds(lambda n: "/" + n, st.from_regex(r"[a-z/]{1,12}", fullmatch=True)),
)


def _write_manifest(root: Path, document: object) -> None:
    (root / "MANIFEST.json").write_text(json.dumps(document))


def _probe(root: Path, action, *must_name: str) -> None:
    """``action`` must raise one clear QHarnessError naming ``must_name`` and touch nothing."""
    before = tree_fingerprint(root)
    with pytest.raises(QHarnessError) as info:
        action()
    assert_clear_error(str(info.value), *must_name)
    assert tree_fingerprint(root) == before, "the failed command changed the store"


@PROBES
@given(name=escaping_names)
def test_manifest_entries_cannot_name_paths_outside_the_store(name: str) -> None:
    """The reported hole: `../../x` in the manifest made refresh delete files outside."""
    with tempfile.TemporaryDirectory() as tmp:
        outside = Path(tmp) / "victim"
        outside.write_text("must survive")
        root = Path(tmp) / "store" / "golden"
        root.mkdir(parents=True)
        make_store(root)
        manifest = json.loads((root / "MANIFEST.json").read_text())
        manifest["entries"][name] = {"sha256": SHA, "file": f"{name}.safetensors"}
        _write_manifest(root, manifest)
        store = GoldenStore(root, entry_builders=OLD_BUILDERS)
        _probe(root, lambda: store.refresh(log=lambda _: None), "MANIFEST.json", "entries[")
        _probe(root, lambda: store.load(ENTRY), "MANIFEST.json")
        problems = store.check(recompute=False)
        assert len(problems) == 1
        assert_clear_error(problems[0], "MANIFEST.json", "entries[")
        assert outside.read_text() == "must survive"


structurally_bad_manifests = st.one_of(
    st.lists(st.integers(), max_size=3),  # a list, not an object
    st.sampled_from([None, 3, "entries", True]),
    st.fixed_dictionaries({"entries": st.sampled_from([[], "x", 3, None])}),
    st.fixed_dictionaries(
        {
            "entries": st.fixed_dictionaries(
                {
                    ENTRY: st.one_of(
                        st.text(max_size=10),  # an entry that is a string
                        st.integers(),
                        st.lists(st.integers(), max_size=2),
                        st.just({}),  # lacks its hash
                        st.fixed_dictionaries(
                            {"sha256": st.one_of(st.none(), st.integers(), st.text(max_size=70))}
                        ),
                        st.just({"sha256": SHA, "file": "../../elsewhere.safetensors"}),
                    )
                }
            )
        }
    ),
)


@PROBES
@given(document=structurally_bad_manifests)
def test_structurally_bad_manifests_are_one_clear_error(document: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_store(root)
        _write_manifest(root, document)
        store = GoldenStore(root, entry_builders=OLD_BUILDERS)
        _probe(root, lambda: store.refresh(log=lambda _: None), "MANIFEST.json")
        _probe(root, lambda: store.load(ENTRY), "MANIFEST.json")
        problems = store.check(recompute=False)
        assert len(problems) == 1
        assert_clear_error(problems[0], "MANIFEST.json")


@pytest.mark.parametrize("raw", [b"\xff\xfe{", b"[" * 100_000, b"{", b"", b"\x00" * 16])
def test_unparsable_manifests_are_one_clear_error(tmp_path: Path, raw: bytes) -> None:
    make_store(tmp_path)
    (tmp_path / "MANIFEST.json").write_bytes(raw)
    store = GoldenStore(tmp_path, entry_builders=OLD_BUILDERS)
    _probe(tmp_path, lambda: store.refresh(log=lambda _: None), "MANIFEST.json")
    _probe(tmp_path, lambda: store.load(ENTRY), "MANIFEST.json")


def _make_directory(path: Path) -> None:
    path.mkdir()


def _make_loop(path: Path) -> None:
    os.symlink(path.name, path)  # points at itself


def _make_fifo(path: Path) -> None:
    os.mkfifo(path)


def _make_outside_link(path: Path) -> None:
    os.symlink("/etc/hostname", path)


@pytest.mark.parametrize(
    ("kind", "make", "words"),
    [
        ("directory", _make_directory, "a directory"),
        ("symlink loop", _make_loop, "symlink loop"),
        ("fifo", _make_fifo, "FIFO"),
        ("link outside", _make_outside_link, "outside"),
    ],
)
def test_golden_file_of_the_wrong_type_is_one_clear_error(
    tmp_path: Path, kind: str, make, words: str
) -> None:
    """A FIFO must not hang (its type is checked on a non-blocking descriptor)."""
    make_store(tmp_path)
    path = tmp_path / "suite" / "a.safetensors"
    path.unlink()
    make(path)
    store = GoldenStore(tmp_path, entry_builders=OLD_BUILDERS)
    _probe(tmp_path, lambda: store.load(ENTRY), "a.safetensors", words)
    problems = store.check(recompute=False)
    assert any(words in p and "a.safetensors" in p for p in problems), problems
    for problem in problems:
        assert_clear_error(problem)


@PROBES
@given(
    pattern=st.one_of(
        escaping_names.filter(lambda p: p.startswith("/") or ".." in p.split("/")),
        st.just("linear/\0x"),
    )
)
def test_only_patterns_are_confined(pattern: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_store(root)
        store = GoldenStore(root, entry_builders=OLD_BUILDERS)
        _probe(root, lambda: store.refresh(only=pattern, log=lambda _: None), "--only")
        _probe(root, lambda: store.check(only=pattern), "--only")


def test_root_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    """A mistyped --root must not get a manifest and golden files written into it."""
    (tmp_path / "notes.txt").write_text("someone's directory")
    store = GoldenStore(tmp_path, entry_builders=OLD_BUILDERS)
    _probe(tmp_path, lambda: store.refresh(log=lambda _: None), str(tmp_path), "not a golden store")
    a_file = tmp_path / "notes.txt"
    _probe(
        tmp_path,
        lambda: GoldenStore(a_file, OLD_BUILDERS).refresh(log=lambda _: None),
        "not a directory",
    )


def test_symlinked_subdirectory_cannot_lead_out_of_the_store(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "golden"
    root.mkdir()
    make_store(root)
    for path in (root / "suite").iterdir():
        path.rename(outside / path.name)
    (root / "suite").rmdir()
    (root / "suite").symlink_to(outside)
    store = GoldenStore(root, entry_builders=OLD_BUILDERS)
    _probe(root, lambda: store.refresh(log=lambda _: None), "suite/a", "outside")


@PROBES
@given(name=escaping_names)
def test_cli_refresh_of_a_hostile_manifest_is_exit_2_before_anything_is_touched(name: str) -> None:
    """The reported probe, end to end: `golden refresh` used to delete `../../x`, exit 0."""
    from harness.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        victim = Path(tmp) / "x"
        victim.write_text("must survive")
        root = Path(tmp) / "a" / "golden"
        root.mkdir(parents=True)
        _write_manifest(root, {"format": 1, "entries": {name: {"sha256": SHA}}})
        before = tree_fingerprint(Path(tmp))
        with contextlib.redirect_stderr(io.StringIO()) as err:
            status = main(["golden", "refresh", "--root", str(root)])
        assert status == EXIT_USAGE
        assert_clear_error(err.getvalue(), "MANIFEST.json", "entries[")
        assert tree_fingerprint(Path(tmp)) == before


@pytest.mark.parametrize("root", ["/", "~", "{tmp}/file", "{tmp}/notes"])
def test_cli_refuses_roots_that_are_not_stores(tmp_path: Path, capsys, root: str) -> None:
    from harness.cli import main

    (tmp_path / "file").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    before = tree_fingerprint(tmp_path)
    status = main(["golden", "refresh", "--root", root.format(tmp=tmp_path), "--only", "mx_*/*"])
    assert status == EXIT_USAGE
    assert_clear_error(capsys.readouterr().err, "--root")
    assert tree_fingerprint(tmp_path) == before


@pytest.mark.parametrize("make", [_make_fifo, _make_directory, _make_loop])
def test_manifest_of_the_wrong_type_is_one_clear_error(tmp_path: Path, make) -> None:
    make_store(tmp_path)
    manifest = tmp_path / "MANIFEST.json"
    manifest.unlink()
    make(manifest)
    store = GoldenStore(tmp_path, entry_builders=OLD_BUILDERS)
    _probe(tmp_path, lambda: store.refresh(log=lambda _: None), "MANIFEST.json")
    problems = store.check(recompute=False)
    assert len(problems) == 1
    assert_clear_error(problems[0], "MANIFEST.json")
