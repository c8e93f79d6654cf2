"""The model level's library pieces, without vLLM or a quantization tool.

A per-channel FP8 layer is built with the harness's own quantizer and laid out as a
compressed-tensors checkpoint and as vLLM holds it after loading (weight transposed, K on
axis 0), so each check can be shown to pass on a faithful runtime and to fail on the bug
it exists for.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.checks import CheckResult
from harness.core.inputs import generator
from harness.core.quantize import quantize
from harness.core.schemes import get_scheme
from harness.loading.checkpoint import LinearCheckpoint, QuantConfig, Shard
from harness.models.files import QUARK_SCHEMES, SCHEMES_BY_CONFIG, scheme_of
from harness.models.layers import (
    RuntimeTensors,
    layer_reference,
    loading_checks,
    output_checks,
    runtime_layer,
    weight_nk,
)
from harness.paths.base import Numerics

SCHEME = get_scheme("fp8_per_channel")
CONVENTIONS = frozenset({"min_scale_1_over_512max", "reciprocal_scale"})
NUMERICS = Numerics(out_dtype=torch.bfloat16, epilogue_roundings=2)
K, WIDTHS = 256, (64, 32, 32)


def _layer() -> tuple[LinearCheckpoint, RuntimeTensors, torch.Tensor]:
    gen = generator("models-library")
    shards, codes, scales = [], [], []
    for i, width in enumerate(WIDTHS):
        w = torch.randn(width, K, generator=gen) / 16
        q = quantize(w, SCHEME.weight)
        shards.append(Shard(f"p{i}", width, q.codes.view(torch.float8_e4m3fn), q.scale, None))
        codes.append(q.codes)
        scales.append(q.scale)
    bias = (torch.randn(sum(WIDTHS), generator=gen) / 2).to(torch.bfloat16)
    ckpt = LinearCheckpoint("layer", QuantConfig("fp8", SCHEME.name), tuple(shards), bias)
    weight = torch.cat(codes).view(torch.float8_e4m3fn).t()  # vLLM's [K, N] layout
    runtime = RuntimeTensors(weight, torch.cat(scales), None, bias.clone(), input_dim=0)
    x = (torch.randn(8, K, generator=gen)).to(torch.bfloat16)
    return ckpt, runtime, x


def _failed(results: list[CheckResult]) -> set[str]:
    return {r.name for r in results if r.failed}


def test_scheme_table_maps_compressed_tensors_configs() -> None:
    for (weights, acts), name in SCHEMES_BY_CONFIG.items():
        keys = ("type", "num_bits", "strategy", "dynamic", "block_structure", "group_size")
        config = {
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": dict(zip(keys, weights, strict=True)),
                        "input_activations": None
                        if acts is None
                        else dict(zip(keys, acts, strict=True)),
                    }
                },
            }
        }
        assert scheme_of(config).name == name
    with pytest.raises(ValueError, match="no harness scheme"):
        scheme_of(
            {
                "quantization_config": {
                    "quant_method": "compressed-tensors",
                    "config_groups": {"g": {"weights": {"num_bits": 4}}},
                }
            }
        )
    with pytest.raises(ValueError, match="quant_method"):
        scheme_of({"quantization_config": {"config_groups": {}}})


def test_scheme_table_maps_quark_configs() -> None:
    keys = ("dtype", "qscheme", "is_dynamic", "group_size", "scale_calculation_mode")
    for (weight, inputs), name in QUARK_SCHEMES.items():
        g = {"weight": dict(zip(keys, weight, strict=True))}
        g["input_tensors"] = dict(zip(keys, inputs, strict=True))
        config = {"quantization_config": {"quant_method": "quark", "global_quant_config": g}}
        assert scheme_of(config).name == name


def test_weight_layout_follows_the_declared_k_axis() -> None:
    w = torch.arange(12, dtype=torch.uint8).reshape(3, 4)
    assert torch.equal(weight_nk(w.view(torch.float8_e4m3fn), 3, 4, 1), w)
    assert torch.equal(weight_nk(w.t().view(torch.float8_e4m3fn), 3, 4, 0), w)
    with pytest.raises(ValueError, match="not"):
        weight_nk(w.view(torch.float8_e4m3fn), 3, 4, 0)


def test_loading_checks_pass_a_faithful_runtime_and_fail_each_bug() -> None:
    ckpt, runtime, _ = _layer()
    assert not _failed(loading_checks(ckpt, runtime, SCHEME))
    first = runtime.weight_scale[0].expand_as(runtime.weight_scale).clone()
    one_d = RuntimeTensors(runtime.weight, first, None, runtime.bias, 0)
    assert "runtime_weight_matches_checkpoint" in _failed(loading_checks(ckpt, one_d, SCHEME))
    no_bias = RuntimeTensors(runtime.weight, runtime.weight_scale, None, None, 0)
    assert "bias_is_checkpoint_bias" in _failed(loading_checks(ckpt, no_bias, SCHEME))


def test_output_checks_hold_an_output_to_its_rounding() -> None:
    ckpt, runtime, x = _layer()
    n = sum(WIDTHS)
    layer = runtime_layer(SCHEME, runtime, n, K, ckpt.bias)
    ref = layer_reference(layer, x, NUMERICS, CONVENTIONS)
    y = ref.center.float().to(torch.bfloat16)  # the correctly rounded float64 result
    assert not _failed(output_checks(y, ref, NUMERICS, "exact"))
    no_bias = (ref.center - ckpt.bias.double()).float().to(torch.bfloat16)
    assert {"vs_reference", "rounding_interval"} <= _failed(
        output_checks(no_bias, ref, NUMERICS, "dropped bias")
    )
    determined = (ref.lo == ref.hi).nonzero()[0]
    one_ulp = y.clone()
    i, j = int(determined[0]), int(determined[1])
    one_ulp[i, j] = (y[i, j].view(torch.int16) + 1).view(torch.bfloat16)
    assert "rounding_interval" in _failed(output_checks(one_ulp, ref, NUMERICS, "1 ulp"))
    nan = y.clone()
    nan[0, 0] = float("nan")
    assert "finite" in _failed(output_checks(nan, ref, NUMERICS, "nan"))
