"""The compiled codec kernels (harness.core.fused) give the reference codecs' bits.

`QHARNESS_FUSED=force` sends the small sweep tensors of tests/core/test_fastcodec.py through
`torch.compile`d kernels, so the same structured float32 sweep (every rounding position,
round bit and sticky state in every binade a format reaches, ties, subnormals, saturation,
NaN, Inf, both signs) checks the fused arithmetic, for every format and clamp, and quantize
checks each tile shape (per-tensor with a scale that is not a power of two, per-channel,
128x128 blocks, MX) against the reference. Each format compiles once (a few seconds).
"""

from __future__ import annotations

import pytest
import torch

from harness.core import fused
from harness.core.fastcodec import encode_fast
from harness.core.formats import FORMATS, decode, encode
from harness.core.fused import FUSED_VARIABLE, fused_status, large_cpu_compiled
from harness.core.quantize import quantize
from harness.core.schemes import QuantSpec
from tests.core.test_fastcodec import (
    CLAMPS,
    SWEEP,
    _nan_aware_equal,
    _operands,
    _same_bits,
    assert_mx_quantize_matches_reference,
)


@pytest.fixture
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUSED_VARIABLE, "force")
    if fused._failure:
        pytest.fail(f"the compiled kernels cannot run here: {fused_status()}")


@pytest.mark.parametrize(("fmt_name", "clamp_max"), CLAMPS)
def test_compiled_encode_matches_reference_over_float32_sweep(
    forced: None, fmt_name: str, clamp_max: float | None
) -> None:
    got = encode_fast(SWEEP, FORMATS[fmt_name], clamp_max)
    assert not fused._failure, fused_status()  # it really ran compiled
    expected = encode(SWEEP, FORMATS[fmt_name], clamp_max)
    bad = (expected != got).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{fmt_name}: {bad.numel()} codes differ, e.g. x={SWEEP[bad[:4]].tolist()} "
        f"ref={expected[bad[:4]].tolist()} compiled={got[bad[:4]].tolist()}"
    )


TILE_SPECS = {
    "per_tensor": QuantSpec("e4m3fn"),
    "per_channel_fnuz": QuantSpec("e4m3fnuz", (1, None)),
    "block_128": QuantSpec("e4m3fn", (128, 128)),
    "mxfp4_even": QuantSpec("e2m1", (1, 32), "e8m0", "even"),
    "mxfp6_e3m2_floor": QuantSpec("e3m2", (1, 32), "e8m0", "floor"),
    "mxfp8_rceil": QuantSpec("e4m3fn", (1, 32), "e8m0", "rceil"),
}


@pytest.mark.parametrize("name", sorted(TILE_SPECS))
def test_compiled_quantize_matches_reference(forced: None, name: str) -> None:
    spec = TILE_SPECS[name]
    for x in _operands():
        got = quantize(x, spec)
        assert not fused._failure, fused_status()
        ref = quantize(x, spec, reference=True)
        assert _same_bits(got.codes, ref.codes), name
        assert _same_bits(got.scale, ref.scale), name
        for dtype in (torch.float64, torch.float32, torch.bfloat16, torch.float16):
            assert _nan_aware_equal(got.dequantize(dtype), ref.dequantize(dtype, reference=True)), (
                name,
                dtype,
            )


@pytest.mark.parametrize("fmt_name", sorted(FORMATS))
def test_every_code_value_is_exact_in_half_precision(fmt_name: str) -> None:
    """What lets the compiled dequantize skip the round trip through bf16/fp16."""
    fmt = FORMATS[fmt_name]
    values = decode(torch.arange(1 << fmt.bits, dtype=torch.uint8), fmt)
    for dtype in (torch.bfloat16, torch.float16):
        assert _nan_aware_equal(values.to(dtype).float(), values), (fmt_name, dtype)


# Every scale mode once, and every element format (its clamps too) under one mode: a
# compile each. The scale mode only changes the per-block arithmetic; the format changes
# the element encode (torch's FP8 cast, or the integer path for FP6/FP4).
MX_COMPILED = [("floor", name, clamp) for name, clamp in CLAMPS] + [
    (mode, "e4m3fn", None) for mode in ("ceil", "even", "rceil")
]


@pytest.mark.parametrize(("mode", "fmt_name", "clamp_max"), MX_COMPILED)
def test_compiled_one_pass_mx_matches_reference_at_every_scale_edge(
    forced: None, mode: str, fmt_name: str, clamp_max: float | None
) -> None:
    assert_mx_quantize_matches_reference(
        QuantSpec(fmt_name, (1, 32), "e8m0", mode, clamp_max=clamp_max)
    )
    assert not fused._failure, fused_status()  # it really ran compiled


def test_compile_failure_falls_back_to_the_eager_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No C++ compiler (or any compile error): the eager result, and the status says why."""

    def no_compiler(fn: object, **kwargs: object) -> object:
        def fails(*args: object) -> object:
            raise RuntimeError("InvalidCxxCompiler: no working C++ compiler found")

        return fails

    monkeypatch.setattr(torch, "compile", no_compiler)
    monkeypatch.setattr(fused, "_failure", [])
    monkeypatch.setenv(FUSED_VARIABLE, "force")
    double = large_cpu_compiled(lambda x: x * 2)
    assert torch.equal(double(torch.ones(3)), torch.full((3,), 2.0))
    assert "InvalidCxxCompiler" in fused_status()
    assert fused_status().startswith("unavailable")


def test_bad_input_raises_as_it_would_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error the eager function raises too is the caller's, not a missing compiler."""
    monkeypatch.setattr(fused, "_failure", [])
    monkeypatch.setenv(FUSED_VARIABLE, "force")
    add = large_cpu_compiled(lambda x, y: x + y)
    with pytest.raises(RuntimeError, match="size of tensor"):
        add(torch.ones(3), torch.ones(4))
    assert not fused._failure


def test_small_tensors_never_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default: only tensors of >= FUSED_MIN_ELEMENTS pay for a compile."""

    def must_not_compile(fn: object, **kwargs: object) -> object:
        raise AssertionError("compiled a small tensor")

    monkeypatch.setattr(torch, "compile", must_not_compile)
    monkeypatch.setattr(fused, "_failure", [])
    monkeypatch.delenv(FUSED_VARIABLE, raising=False)
    negate = large_cpu_compiled(lambda x: -x)
    assert torch.equal(negate(torch.ones(fused.FUSED_MIN_ELEMENTS - 1)), -torch.ones(1 << 20)[1:])
    assert not fused._failure


def test_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUSED_VARIABLE, "0")
    assert fused_status() == f"off ({FUSED_VARIABLE}=0)"
