"""`repro` on a damaged or hand-edited bundle: tampered tensor shapes or dtypes, metadata
nested past any bundle's, ``case`` or ``platform`` of the wrong JSON type. Reported: each
was "internal error", exit 3. Each is one clear line naming what is wrong, exit 2. So are
weight codes past the format's last (a flipped byte in an FP4 bundle), ``--path native`` on
a scheme with no native kernel, and a bundle path that is a symlink loop.

Also: a two-level (NVFP4) weight's per-tensor scale was not kept in bundles, so re-running
an NVFP4 case that passed in the suite failed; it is kept now, and an older bundle without
it is a clear error rather than a wrong verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from reliability_helpers import assert_clear_error
from safetensors.torch import save_file

from harness import cli
from harness.core.schemes import get_scheme
from harness.linear.cases import linear_cases, load_linear_case
from harness.linear.checks import expected_output
from harness.linear.paths import get_path
from harness.linear.repro import linear_bundle_tensors
from harness.paths.base import linear_numerics
from harness.store.golden_store import GoldenStore
from harness.store.locations import golden_root
from harness.store.repro import BUNDLE_FORMAT, Bundle, read_bundle, write_bundle


def _bundle(directory: Path, scheme: str) -> Path:
    """A genuine bundle of the emulated path on the first case of ``scheme`` with a bias,
    made as the suite makes it (`suites/test_linear.py`)."""
    case = next(c for c in linear_cases() if c.scheme == scheme and c.path == "emulated" and c.bias)
    path, spec = get_path("emulated"), get_scheme(scheme)
    data = GoldenStore(golden_root()).load(f"linear/{scheme}")
    loaded = load_linear_case(data, scheme, case.shape, case.bias)
    y = path.forward(loaded.layer, loaded.x, case.problem.out_dtype)
    expected = expected_output(loaded, spec, case.bias, linear_numerics(path, spec, case.problem))
    tensors = linear_bundle_tensors(loaded.layer, loaded.x, y, expected)
    meta = {"kind": "linear", "case": case.record_fields(), "platform": {"device": "cpu"}}
    return write_bundle(
        directory, f"suites/test_linear.py::test_linear[{case.id}]", Bundle(tensors, meta)
    )


def _rewrite(
    source: Path,
    target: Path,
    tensors: dict[str, torch.Tensor] | None = None,
    meta: Any = None,
    raw_meta: str | None = None,
) -> Path:
    bundle = read_bundle(source)
    if raw_meta is None:
        raw_meta = json.dumps(bundle.meta if meta is None else meta)
    save_file(
        tensors if tensors is not None else bundle.tensors,
        str(target),
        metadata={"qharness": raw_meta},
    )
    return target


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(tmp_path_factory.mktemp("bundle"), "fp8_per_tensor")


def _repro(bundle: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = cli.main(["repro", str(bundle), "--path", "emulated"])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_genuine_bundle_passes(genuine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _repro(genuine, capsys)
    assert status == 0, out
    assert "PASS: path emulated (output identical to the bundle's)" in out


TENSORS = (
    "x",
    "w_codes",
    "w_scale",
    "bias",
    "y",
    "input_scale",
    "reference",
    "bound",
    "lo",
    "hi",
    "exact",
    "cancellation_db",
    "roundings",
)


def _reshaped(t: torch.Tensor) -> torch.Tensor:
    return torch.cat([t.reshape(-1), t.reshape(-1)[:1]])  # one element more, 1-D


def _retyped(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int32) if t.is_floating_point() else t.to(torch.float32)


# a scalar (cancellation_db, roundings) is read as a number: int or float both fit
TAMPERED = [(n, _reshaped) for n in TENSORS] + [
    (n, _retyped) for n in TENSORS if n not in ("cancellation_db", "roundings")
]


@pytest.mark.parametrize(
    ("name", "tamper"), TAMPERED, ids=[f"{n}-{f.__name__.strip('_')}" for n, f in TAMPERED]
)
def test_a_tampered_tensor_is_one_clear_error(
    genuine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, tamper: Any
) -> None:
    tensors = dict(read_bundle(genuine).tensors)
    tensors[name] = tamper(tensors[name])
    status, out, err = _repro(_rewrite(genuine, tmp_path / "b.safetensors", tensors), capsys)
    assert status == 2, out + err
    assert_clear_error(err, f"{name} is", "damaged or hand-edited")


@pytest.mark.parametrize(
    "raw",
    [
        '{"format": "' + BUNDLE_FORMAT + '", "case": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"format": "' + BUNDLE_FORMAT + '", "case": ' + '{"a":' * 100_000 + "1" + "}" * 100_001,
    ],
    ids=["arrays", "objects"],
)
def test_deeply_nested_metadata_is_one_clear_error(
    genuine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str
) -> None:
    status, out, err = _repro(_rewrite(genuine, tmp_path / "b.safetensors", raw_meta=raw), capsys)
    assert status == 2, out + err
    assert_clear_error(err, "not a qharness repro bundle")


@pytest.mark.parametrize("field", ["case", "platform"])
@pytest.mark.parametrize("value", ["text", [1, 2], 3])
def test_metadata_objects_of_the_wrong_type_are_one_clear_error(
    genuine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any
) -> None:
    meta = {**read_bundle(genuine).meta, field: value}
    status, out, err = _repro(_rewrite(genuine, tmp_path / "b.safetensors", meta=meta), capsys)
    assert status == 2, out + err
    assert_clear_error(err, f"field {field!r} must be an object")


HOSTILE = "cpu\x1b]0;owned\x07\x1b[2J\n## forged heading\r\n- [x](javascript:alert(1))"


def test_a_bundles_fields_reach_the_terminal_inert(
    genuine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reported: `repro` printed a bundle's platform and failure (a bundle comes from
    another machine) with raw escape sequences and lines of their own."""
    meta = {
        **read_bundle(genuine).meta,
        "platform": {"device": HOSTILE, "arch": HOSTILE},
        "failure": HOSTILE,
        "nodeid": HOSTILE,
    }
    status, out, err = _repro(_rewrite(genuine, tmp_path / "b.safetensors", meta=meta), capsys)
    assert status == 0, out + err
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "\r" not in out
    assert not [
        line
        for line in out.splitlines()
        if "forged" in line and "case" not in line and "failed" not in line
    ]
    assert "\\u001b]0;owned" in out  # shown, not sent


def test_an_nvfp4_bundle_keeps_its_per_tensor_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path, "w_nvfp4")
    assert "w_global_scale" in read_bundle(bundle).tensors
    status, out, err = _repro(bundle, capsys)
    assert status == 0, out + err
    assert "PASS: path emulated (output identical to the bundle's)" in out

    older = dict(read_bundle(bundle).tensors)
    del older["w_global_scale"]  # as bundles were written before
    status, out, err = _repro(_rewrite(bundle, tmp_path / "old.safetensors", older), capsys)
    assert status == 2, out + err
    assert_clear_error(err, "lacks w_global_scale", "run the case again")


# Reported: FP4 codes above 15, or one flipped byte in a bundle's weight codes, crashed the
# decoder (IndexError, exit 3); `--path native` on an NVFP4 bundle, which `--help` offers,
# and a bundle that is a symlink loop were internal errors too. Each is one line, exit 2.
@pytest.fixture(scope="module")
def nvfp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(tmp_path_factory.mktemp("nvfp4"), "w_nvfp4")


def test_fp4_codes_above_15_are_one_clear_error(
    nvfp4: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tensors = dict(read_bundle(nvfp4).tensors)
    codes = tensors["w_codes"].clone()
    codes[0, 0] = 16  # one past e2m1's largest code
    tensors["w_codes"] = codes
    target = _rewrite(nvfp4, tmp_path / "codes.safetensors", tensors)
    status, out, err = _repro(target, capsys)
    assert status == 2, out + err
    assert_clear_error(err, str(target), "w_codes holds 1 code(s) above 15", "damaged")


def test_a_flipped_byte_in_the_codes_is_one_clear_error(
    nvfp4: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = bytearray(nvfp4.read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    start, _ = json.loads(data[8 : 8 + header_len])["w_codes"]["data_offsets"]
    data[8 + header_len + start] ^= 0x80  # the top bit of the first code: 128 or more
    target = tmp_path / "flipped.safetensors"
    target.write_bytes(bytes(data))
    status, out, err = _repro(target, capsys)
    assert status == 2, out + err
    assert_clear_error(err, str(target), "w_codes holds 1 code(s) above 15")


def test_native_on_a_scheme_without_a_native_kernel_is_one_clear_error(
    nvfp4: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["repro", str(nvfp4), "--path", "native"])
    out, err = capsys.readouterr()
    assert status == 2, out + err
    assert_clear_error(err, "--path native cannot run this w_nvfp4 case", "--path emulated")


@pytest.mark.parametrize("hops", [1, 2])
def test_a_bundle_that_is_a_symlink_loop_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hops: int
) -> None:
    links = [tmp_path / f"loop{i}.safetensors" for i in range(hops)]
    for i, link in enumerate(links):
        link.symlink_to(links[(i + 1) % hops])
    status, out, err = _repro(links[0], capsys)
    assert status == 2, out + err
    assert_clear_error(err, str(links[0]), "symlink loop")
