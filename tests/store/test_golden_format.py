"""The golden file format: packed codes described by the file and the manifest, format-1
stores still readable, unknown formats and bad packing metadata one clear error, and the
digest that stands in for a regenerated input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from harness.quantizers.mx_edge_cases import edge_blocks, golden_blocks
from harness.store.golden_errors import GoldenError
from harness.store.golden_format import MANIFEST_FORMAT, METADATA_KEY
from harness.store.golden_registry import GoldenData, regenerated, tensor_digest
from harness.store.golden_store import GoldenStore
from harness.store.packing import pack_bits

FP4 = torch.arange(16, dtype=torch.uint8).reshape(4, 4)  # fits in 4 bits
FP6 = torch.arange(40, 64, dtype=torch.uint8).reshape(2, 12)  # needs 6
FP8 = torch.tensor([0, 200, 64], dtype=torch.uint8)  # needs all 8
REF = torch.linspace(-1.0, 1.0, 8)


def _build() -> GoldenData:
    return GoldenData(exact={"fp4": FP4, "fp6": FP6, "fp8": FP8}, reference={"y_ref": REF})


def _store(root: Path) -> GoldenStore:
    return GoldenStore(root, entry_builders={"suite/a": (_build, "test:a")})


def _raw_file(root: Path) -> tuple[dict[str, str], dict[str, torch.Tensor]]:
    with safe_open(str(root / "suite" / "a.safetensors"), framework="pt") as f:
        return dict(f.metadata() or {}), {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118


def test_refresh_packs_sub_byte_codes_and_says_how(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    metadata, stored = _raw_file(tmp_path)
    assert list(metadata) == [METADATA_KEY]
    layout = json.loads(metadata[METADATA_KEY])
    assert layout == {
        "reference": ["y_ref"],
        "packed": {"fp4": {"bits": 4, "shape": [4, 4]}, "fp6": {"bits": 6, "shape": [2, 12]}},
    }
    assert stored["fp4"].numel() == 8  # 16 codes * 4 bits
    assert stored["fp6"].numel() == 18  # 24 codes * 6 bits
    assert torch.equal(stored["fp8"], FP8)
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    assert manifest["format"] == MANIFEST_FORMAT == 2
    assert manifest["encoding"]["metadata_key"] == METADATA_KEY
    assert manifest["encoding"]["packed_widths"] == [4, 6]
    data = _store(tmp_path).load("suite/a")
    for name, want in _build().tensors.items():
        assert data.tensors[name].dtype == want.dtype
        assert torch.equal(data.tensors[name], want), name
    assert set(data.reference) == {"y_ref"}
    assert _store(tmp_path).check() == []


def test_a_format_1_store_loads_and_a_refresh_rewrites_it_compact(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    path = tmp_path / "suite" / "a.safetensors"
    save_file(_build().tensors, str(path), metadata={"reference_keys": '["y_ref"]'})
    record = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    manifest = {"format": 1, "entries": {"suite/a": record}}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    data = _store(tmp_path).load("suite/a")
    assert torch.equal(data.exact["fp4"], FP4)
    assert set(data.reference) == {"y_ref"}
    assert _store(tmp_path).check() == []
    changes = _store(tmp_path).refresh(log=lambda _: None)
    assert [c.status for c in changes] == ["re-recorded"]
    metadata, stored = _raw_file(tmp_path)
    assert METADATA_KEY in metadata
    assert stored["fp4"].numel() == 8
    assert json.loads((tmp_path / "MANIFEST.json").read_text())["format"] == MANIFEST_FORMAT


def test_a_manifest_format_this_version_cannot_read_is_one_clear_error(tmp_path: Path) -> None:
    _store(tmp_path).refresh(log=lambda _: None)
    manifest = json.loads((tmp_path / "MANIFEST.json").read_text())
    manifest["format"] = 3
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(GoldenError, match=r"'format' is 3; this qharness reads formats 1, 2"):
        _store(tmp_path).load("suite/a")


@pytest.mark.parametrize(
    ("packed", "words"),
    [
        ({"fp4": {"bits": 5, "shape": [4, 4]}}, "bits: one of"),
        ({"fp4": {"bits": 4, "shape": [4, -4]}}, "bits: one of"),
        ({"fp4": {"bits": 4, "shape": [4, 5]}}, "cannot hold 20 4-bit values"),
        ({"fp4": {"bits": 4, "shape": [2**40, 2**40]}}, "exceeds its bytes"),
        ({"missing": {"bits": 4, "shape": [1]}}, "missing"),
    ],
)
def test_bad_packing_metadata_is_one_clear_error(
    tmp_path: Path, packed: dict[str, object], words: str
) -> None:
    (tmp_path / "suite").mkdir()
    path = tmp_path / "suite" / "a.safetensors"
    layout = json.dumps({"reference": [], "packed": packed})
    save_file({"fp4": pack_bits(FP4, 4)}, str(path), metadata={METADATA_KEY: layout})
    record = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    manifest = {"format": 2, "entries": {"suite/a": record}}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(GoldenError, match="not a readable golden file") as info:
        _store(tmp_path).load("suite/a")
    assert words in str(info.value)


def test_a_regenerated_input_must_match_its_digest() -> None:
    x = torch.tensor([1.0, float("nan"), 2.0**-149])
    data = GoldenData(exact={"x_sha256": tensor_digest(x)})
    assert regenerated("suite/a", "x", x.clone(), data) is not None
    moved = x.clone()
    moved[2] = 0.0  # a flushed subnormal is a different input
    with pytest.raises(GoldenError, match=r"regenerated x differs.*refresh --only 'suite/a'"):
        regenerated("suite/a", "x", moved, data)
    with pytest.raises(GoldenError, match="has no y_sha256"):
        regenerated("suite/a", "y", x, data)


def test_mx_edge_blocks_are_checked_against_the_golden_digest() -> None:
    blocks = edge_blocks("e2m1").blocks
    data = GoldenData(exact={"blocks_sha256": tensor_digest(blocks)})
    assert torch.equal(golden_blocks(data, "e2m1").view(torch.int32), blocks.view(torch.int32))
    wrong = tensor_digest(blocks)
    wrong[0] ^= 1
    with pytest.raises(GoldenError, match="mx_scales/e2m1: the regenerated blocks differ"):
        golden_blocks(GoldenData(exact={"blocks_sha256": wrong}), "e2m1")
