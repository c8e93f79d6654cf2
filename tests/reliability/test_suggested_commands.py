"""Reported: suggested commands dropped ``--root``. Every ``golden refresh`` command a
message suggests must act on the store the user named, so pasting it works: for a store
other than the default one it carries ``--root``; for the default store it needs none."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
import torch
from reliability_helpers import OLD_BUILDERS, make_store

from harness.store.golden_errors import GoldenError, refresh_command
from harness.store.golden_registry import GoldenData, regenerated, tensor_digest
from harness.store.golden_store import GoldenStore
from harness.store.locations import golden_root

ENTRY = "linear/fp8_per_tensor"


def _suggested(message: str) -> list[str]:
    """The ``python -m harness ...`` command at the end of ``message``, as argv for main."""
    command = message[message.index("python -m harness") :].rstrip("`")
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "harness"]
    return argv[3:]


def _flip_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_a_pasted_refresh_command_repairs_the_store_named_by_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The end-to-end probe: `golden check --root COPY` on a damaged entry suggests a command
    that, pasted, repairs COPY (and leaves the default store alone)."""
    from harness.cli import main

    root = tmp_path / "my store"  # a space: the command must quote it
    shutil.copytree(golden_root(), root)
    _flip_last_byte(root / f"{ENTRY}.safetensors")
    shipped = (golden_root() / f"{ENTRY}.safetensors").read_bytes()

    assert main(["golden", "check", "--no-recompute", "--root", str(root)]) == 1
    problem = capsys.readouterr().err.splitlines()[1]
    argv = _suggested(problem)
    assert argv[-2:] == ["--root", str(root)]

    assert main(argv) == 0
    assert main(["golden", "check", "--no-recompute", "--root", str(root)]) == 0
    assert (golden_root() / f"{ENTRY}.safetensors").read_bytes() == shipped


def test_every_store_message_names_its_root(tmp_path: Path) -> None:
    root = tmp_path / "golden"
    make_store(root)
    store = GoldenStore(root, entry_builders=OLD_BUILDERS)
    messages = []
    _flip_last_byte(root / "suite" / "a.safetensors")
    with pytest.raises(GoldenError) as corrupt:
        store.load("suite/a")
    messages.append(str(corrupt.value))
    store = GoldenStore(root, entry_builders={**OLD_BUILDERS, "suite/b": OLD_BUILDERS["other/c"]})
    messages += [p for p in store.check() if "stale" in p]  # b's builder now differs
    manifest = json.loads((root / "MANIFEST.json").read_text())
    (root / "MANIFEST.json").write_text(json.dumps({**manifest, "format": 99}))
    with pytest.raises(GoldenError) as bad_manifest:
        GoldenStore(root, entry_builders=OLD_BUILDERS).manifest()
    messages.append(str(bad_manifest.value))

    assert len(messages) == 3, messages
    for message in messages:
        assert f"--root {root}" in message, message


def test_a_regenerated_input_message_names_the_store_it_was_loaded_from(tmp_path: Path) -> None:
    root = tmp_path / "golden"
    x = torch.tensor([1.0, 2.0**-149, 3.0])

    def build() -> GoldenData:
        return GoldenData(exact={"x_sha256": tensor_digest(x)})

    make_store(root, {"suite/a": (build, "t:a")})
    data = GoldenStore(root, entry_builders={"suite/a": (build, "t:a")}).load("suite/a")
    with pytest.raises(GoldenError, match="regenerated x differs") as info:
        regenerated("suite/a", "x", x * 2, data)
    assert _suggested(str(info.value))[-2:] == ["--root", str(root)]


def test_the_default_store_needs_no_root() -> None:
    assert refresh_command(ENTRY, golden_root()) == (
        f"python -m harness golden refresh --only '{ENTRY}'"
    )
    assert refresh_command(ENTRY) == refresh_command(ENTRY, golden_root())
