"""Codec throughput on a 4096x4096 float32 tensor, side by side with the floors that bound it.

    python -m pytest benchmarks/test_bench_codecs.py --benchmark-only --benchmark-group-by=group

Targets (compare the groups' means; CI machines are noisy, so nothing here asserts a time):
encode (codes + E8M0 scales, FP4 packed) >= 10x torchao's `MXTensor.to_mx` for MXFP4/MXFP6,
>= 3x for MXFP8, within 10x of `clone()`; NVFP4 encode (codes packed, E4M3 block scales,
the float32 global scale) and decode within 10x of `clone()` and faster than torchao's
`NVFP4Tensor.to_nvfp4` (with its per-tensor scale from the amax, as NVFP4 weights are made)
and its `dequantize`; FP8 per-tensor/per-channel encode within 3x of
`tensor.to(torch.float8_e4m3fn)`; decode within 5x of `clone()`. torchao is the optional
``bench`` extra; without it its rows skip with the reason.

Large CPU tensors run compiled kernels (harness.core.fused): each encode row calls once
before timing and keeps that first call's seconds, which include compiling (or loading the
kernel from inductor's on-disk cache), in ``extra_info["first_call_s"]``, with the fused
path's status; the timed rounds are the amortised cost.
"""

from __future__ import annotations

import importlib.util
import time
from typing import Any

import pytest
import torch

from harness.core.fastcodec import pack_fp4_fast
from harness.core.fused import fused_status
from harness.core.quantize import QuantizedTensor, quantize, stored_scale
from harness.core.schemes import QuantSpec, nvfp4_spec

SHAPE = (4096, 4096)
MX_SPECS = {
    "mxfp4": QuantSpec("e2m1", (1, 32), "e8m0", "floor"),
    "mxfp6_e2m3": QuantSpec("e2m3", (1, 32), "e8m0", "floor"),
    "mxfp6_e3m2": QuantSpec("e3m2", (1, 32), "e8m0", "floor"),
    "mxfp8": QuantSpec("e4m3fn", (1, 32), "e8m0", "floor"),
}
NVFP4_SPECS = {"nvfp4": nvfp4_spec()}
FP8_SPECS = {
    "fp8_per_tensor": QuantSpec("e4m3fn"),
    "fp8_per_channel": QuantSpec("e4m3fn", (1, None)),
}
HAVE_TORCHAO = importlib.util.find_spec("torchao") is not None


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    return torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))


def encode_to_storage(x: torch.Tensor, spec: QuantSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """What a checkpoint stores: codes (FP4 packed two per byte) and stored scales."""
    q = quantize(x, spec)
    codes = pack_fp4_fast(q.codes) if spec.format == "e2m1" else q.codes
    return codes, stored_scale(q.scale, spec)  # NVFP4's float32 global scale: q.global_scale


@pytest.mark.benchmark(group="floor")
def test_clone(benchmark: Any, x: torch.Tensor) -> None:
    benchmark(x.clone)


@pytest.mark.benchmark(group="floor")
def test_torch_to_float8_e4m3fn(benchmark: Any, x: torch.Tensor) -> None:
    benchmark(x.to, torch.float8_e4m3fn)


ALL_SPECS = {**MX_SPECS, **NVFP4_SPECS, **FP8_SPECS}


@pytest.mark.parametrize("name", sorted(ALL_SPECS))
def test_encode(benchmark: Any, x: torch.Tensor, name: str) -> None:
    benchmark.group = f"encode {name}"
    spec = ALL_SPECS[name]
    start = time.perf_counter()
    encode_to_storage(x, spec)  # compiles the fused kernels for this format and shape
    benchmark.extra_info["first_call_s"] = round(time.perf_counter() - start, 3)
    benchmark.extra_info["fused"] = fused_status()
    benchmark(encode_to_storage, x, spec)


TORCHAO_DTYPES = {
    "mxfp4": "float4_e2m1fn_x2",
    "mxfp6_e2m3": "DTYPE_FP6_E2M3",
    "mxfp6_e3m2": "DTYPE_FP6_E3M2",
    "mxfp8": "float8_e4m3fn",
}


@pytest.mark.parametrize("name", sorted(TORCHAO_DTYPES))
def test_torchao_to_mx(benchmark: Any, x: torch.Tensor, name: str) -> None:
    benchmark.group = f"encode {name}"
    if not HAVE_TORCHAO:
        pytest.skip("torchao is not installed (optional extra: pip install '.[bench]')")
    from torchao.prototype.mx_formats import constants
    from torchao.prototype.mx_formats.mx_tensor import MXTensor

    attr = TORCHAO_DTYPES[name]
    dtype = getattr(torch, attr, None) or getattr(constants, attr, None)
    if dtype is None:
        pytest.skip(f"this torchao has no element dtype {attr}")
    benchmark(MXTensor.to_mx, x, dtype, 32)


@pytest.mark.parametrize("name", sorted(ALL_SPECS))
def test_decode(benchmark: Any, x: torch.Tensor, name: str) -> None:
    benchmark.group = "decode"
    q: QuantizedTensor = quantize(x, ALL_SPECS[name])
    benchmark(q.dequantize)


def _torchao_nvfp4() -> Any:
    if not HAVE_TORCHAO:
        pytest.skip("torchao is not installed (optional extra: pip install '.[bench]')")
    try:
        from torchao.prototype.mx_formats import nvfp4_tensor
    except ImportError as exc:
        pytest.skip(f"this torchao has no NVFP4Tensor: {exc}")
    return nvfp4_tensor


def test_torchao_to_nvfp4(benchmark: Any, x: torch.Tensor) -> None:
    """Two-level NVFP4 as torchao makes a weight: per-tensor scale from the amax, then
    `to_nvfp4` (E4M3 block scales, FP4 packed)."""
    benchmark.group = "encode nvfp4"
    nv = _torchao_nvfp4()

    def encode() -> Any:
        scale = nv.per_tensor_amax_to_scale(x.abs().amax())
        return nv.NVFP4Tensor.to_nvfp4(x, per_tensor_scale=scale)

    benchmark(encode)


def test_torchao_nvfp4_dequantize(benchmark: Any, x: torch.Tensor) -> None:
    benchmark.group = "decode"
    nv = _torchao_nvfp4()
    t = nv.NVFP4Tensor.to_nvfp4(x, per_tensor_scale=nv.per_tensor_amax_to_scale(x.abs().amax()))
    benchmark(t.dequantize, torch.float32)
