"""The golden store: integrity, staleness, atomic refresh, and clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.store.golden_errors import GoldenError
from harness.store.golden_registry import GoldenData
from harness.store.golden_store import GoldenStore


def _builder(scale: float = 1.0):
    def build() -> GoldenData:
        codes = torch.arange(16, dtype=torch.uint8).reshape(4, 4)
        ref = torch.linspace(-1.0, 1.0, 8) * scale
        return GoldenData(exact={"codes": codes}, reference={"y_ref": ref})

    return build


def _store(root: Path, scale: float = 1.0, extra: bool = False) -> GoldenStore:
    builders = {"suite/a": (_builder(scale), "test:a")}
    if extra:
        builders["suite/b"] = (_builder(2.0), "test:b")
    return GoldenStore(root, entry_builders=builders)


def test_refresh_then_load_and_check(tmp_path: Path) -> None:
    changes = _store(tmp_path).refresh(log=lambda _: None)
    assert [(c.entry, c.status) for c in changes] == [("suite/a", "new")]
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    record = manifest["entries"]["suite/a"]
    assert record["generator"] == "test:a"
    assert {"sha256", "bytes", "torch_version", "harness_version", "created"} <= set(record)
    data = _store(tmp_path).load("suite/a")
    assert torch.equal(data.exact["codes"], _builder()().exact["codes"])
    assert set(data.reference) == {"y_ref"}
    assert _store(tmp_path).check() == []


def test_unchanged_refresh_keeps_files_and_provenance(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    before = (tmp_path / "MANIFEST.json").read_text()
    changes = _store(tmp_path).refresh(log=lambda _: None)
    assert [c.status for c in changes] == ["unchanged"]
    assert (tmp_path / "MANIFEST.json").read_text() == before


def test_refresh_reports_what_changed(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    lines: list[str] = []
    changes = _store(tmp_path, scale=3.0).refresh(log=lines.append)
    assert changes[0].status == "changed"
    assert any("y_ref" in line and "old max|x| 1" in line and "new 3" in line for line in lines)


def test_missing_entry_fails_with_the_command_that_creates_it(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match=r"golden refresh --only 'suite/a'"):
        _store(tmp_path).load("suite/a")


def test_hash_mismatch_is_reported(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    path = tmp_path / "suite" / "a.safetensors"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # flip bits in the tensor data, header still parses
    path.write_bytes(bytes(raw))
    with pytest.raises(GoldenError, match="does not match its manifest sha256"):
        _store(tmp_path).load("suite/a")
    problems = _store(tmp_path).check()
    assert len(problems) == 1
    assert "a.safetensors" in problems[0]


def test_truncated_file_is_reported_not_crashed(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    path = tmp_path / "suite" / "a.safetensors"
    path.write_bytes(path.read_bytes()[:40])
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    import hashlib

    # Make the hash agree, so the parser itself must reject the truncated file.
    manifest["entries"]["suite/a"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(GoldenError, match="not a readable golden file"):
        _store(tmp_path).load("suite/a")


def test_corrupted_manifest_is_one_clear_error(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    (tmp_path / "MANIFEST.json").write_text("{not json")
    problems = _store(tmp_path).check()
    assert len(problems) == 1
    assert "not a valid manifest" in problems[0]


def test_stale_golden_is_detected_by_recompute(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    problems = _store(tmp_path, scale=1.5).check()
    assert len(problems) == 1
    assert "stale" in problems[0]
    assert "golden refresh --only 'suite/a'" in problems[0]


def test_reference_allows_one_float32_ulp_and_no_more(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    stored = _store(tmp_path).load("suite/a").reference["y_ref"]

    def nudged(ulps: int):
        def build() -> GoldenData:
            bits = stored.clone().view(torch.int32) + ulps
            return GoldenData(
                exact={"codes": torch.arange(16, dtype=torch.uint8).reshape(4, 4)},
                reference={"y_ref": bits.view(torch.float32)},
            )

        return build

    one = GoldenStore(tmp_path, entry_builders={"suite/a": (nudged(1), "t")})
    two = GoldenStore(tmp_path, entry_builders={"suite/a": (nudged(2), "t")})
    assert one.check() == []
    assert "stale" in two.check()[0]


def test_untracked_and_orphaned_files_are_reported(tmp_path: Path) -> None:
    _store(tmp_path, extra=True).refresh(log=lambda _: None)
    (tmp_path / "suite" / "stray.safetensors").write_bytes(b"x")
    problems = _store(tmp_path).check()  # builder for suite/b no longer exists
    assert any("orphaned" in p and "suite/b" in p for p in problems)
    assert any("stray.safetensors" in p and "not listed" in p for p in problems)


def test_interrupted_refresh_leaves_the_old_store_intact(tmp_path: Path) -> None:
    _store(tmp_path, extra=True).refresh(log=lambda _: None)
    snapshot = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    def explode() -> GoldenData:
        raise KeyboardInterrupt

    store = GoldenStore(
        tmp_path,
        entry_builders={"suite/a": (_builder(5.0), "t"), "suite/b": (explode, "t")},
    )
    with pytest.raises(KeyboardInterrupt):
        store.refresh(log=lambda _: None)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == snapshot


def test_only_pattern_must_match(tmp_path: Path) -> None:
    with pytest.raises(GoldenError, match="matches no golden entry"):
        _store(tmp_path).refresh(only="nothing/*", log=lambda _: None)


def test_no_pickle_in_the_store(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert sorted(files) == ["MANIFEST.json", "a.safetensors"]
