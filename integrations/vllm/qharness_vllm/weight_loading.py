"""A checkpoint into vLLM's own fused linear layer, through vLLM's ``weight_loader_v2``.

The step before any post-load processing: the layer a model with these shards builds
(`vllm_layer`: ``QKVParallelLinear`` for q/k/v shards of one K/V width,
``MergedColumnParallelLinear`` for other fused layers such as gate/up,
``ColumnParallelLinear`` for an unfused one), its FP8 parameters made as vLLM's FP8 method
makes them (vLLM's ``create_fp8_weight_parameter`` / ``create_fp8_scale_parameter`` /
``create_fp8_input_scale``: one per-tensor scale slot per logical shard, initialized to
float32's min; scales in the dtype the checkpoint stores them in, E8M0 bytes as
``float8_e8m0fnu`` as the method makes them for ``is_scale_e8m0``), and every checkpoint
tensor handed to the parameter's ``weight_loader`` with the shard id vLLM's model loader
passes: ``"q"``/``"k"``/``"v"`` or the shard's index for a tensor stored per shard,
``None`` for a layer stored fused on disk (one ``qkv_proj`` tensor, one scale).

What the layer holds then is the `LoadState` the rest of the loader transforms. A scale
slot vLLM's loader left as it was made (not a finite positive scale) is flagged unloaded,
so loading a shard of non-zero width without its scale fails the load (`finish`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.model_executor.layers.linear import (
    ColumnParallelLinear,
    MergedColumnParallelLinear,
    QKVParallelLinear,
)
from vllm.model_executor.layers.quantization.utils.fp8_utils import (
    create_fp8_input_scale,
    create_fp8_scale_parameter,
    create_fp8_weight_parameter,
)
from vllm.model_executor.parameter import (
    BlockQuantScaleParameter,
    ChannelQuantScaleParameter,
    PerTensorScaleParameter,
)

from harness import STORED_SCALE_DTYPES, WHOLE, LinearCheckpoint, LoadState, loaded_slots
from qharness_vllm.linear import single_rank

QKV_NAMES = ("q_proj", "k_proj", "v_proj")
QKV_SHARD_IDS = ("q", "k", "v")  # what vLLM's model loaders pass for q_proj, k_proj, v_proj


@dataclass(frozen=True)
class ScaleParameter:
    """vLLM's scale parameter class for one weight granularity."""

    kind: type
    rows: str  # "slot": one per logical shard; "row": one per output row; "block"


# weight block -> vLLM's scale parameter (any other block: BlockQuantScaleParameter)
SCALE_PARAMETERS: dict[tuple[int | None, int | None], ScaleParameter] = {
    (WHOLE, WHOLE): ScaleParameter(PerTensorScaleParameter, "slot"),
    (1, WHOLE): ScaleParameter(ChannelQuantScaleParameter, "row"),
}
BLOCK_SCALES = ScaleParameter(BlockQuantScaleParameter, "block")


def _scale_parameter(block: tuple[int | None, int | None]) -> ScaleParameter:
    return SCALE_PARAMETERS.get(block, BLOCK_SCALES)


def _is_qkv(logical: tuple[tuple[str, int], ...]) -> bool:
    names = tuple(n for n, _ in logical)
    widths = [w for _, w in logical]
    return names == QKV_NAMES and widths[1] == widths[2] > 0


def vllm_layer(
    logical: tuple[tuple[str, int], ...], k: int
) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """The vLLM layer for these logical shards, and the shard id of each (unquantized as
    built: `load_with_vllm` gives it vLLM's FP8 parameters)."""
    widths = [w for _, w in logical]
    if len(logical) == 1:
        return ColumnParallelLinear(k, widths[0], bias=False), (None,)
    if _is_qkv(logical):
        head = math.gcd(*widths)
        layer = QKVParallelLinear(k, head, widths[0] // head, widths[1] // head, bias=False)
        return layer, QKV_SHARD_IDS
    return MergedColumnParallelLinear(k, widths, bias=False), tuple(range(len(widths)))


def _stored_scale_dtype(ckpt: LinearCheckpoint) -> torch.dtype:
    """The dtype the checkpoint stores its weight scales in (`STORED_SCALE_DTYPES`)."""
    stored = [s.weight_scale.dtype for s in ckpt.shards if s.weight_scale is not None]
    return stored[0] if stored else STORED_SCALE_DTYPES[ckpt.scheme.weight.scale_fmt.name]


def _fp8_parameters(layer: torch.nn.Module, ckpt: LinearCheckpoint, k: int) -> ScaleParameter:
    """vLLM's FP8 parameters on ``layer``, made as its FP8 linear method makes them."""
    spec = ckpt.scheme.weight
    widths = list(ckpt.logical_widths)
    loader = layer.weight_loader_v2
    block = None if spec.block[0] in (WHOLE, 1) else [spec.block[0], spec.block[1]]
    layer.logical_widths = widths
    layer.weight_block_size = block
    layer.register_parameter("weight", create_fp8_weight_parameter(sum(widths), k, loader))
    stored = _stored_scale_dtype(ckpt)
    param = _scale_parameter(spec.block)
    scale = create_fp8_scale_parameter(
        param.kind, widths, k, block, loader, None if stored == torch.float32 else stored
    )
    layer.register_parameter("weight_scale", scale)
    act = ckpt.scheme.activation
    if act is not None and not act.dynamic:
        layer.register_parameter("input_scale", create_fp8_input_scale(widths, loader))
    return param


def load_with_vllm(ckpt: LinearCheckpoint, target_format: str) -> LoadState:
    """The fused state vLLM's weight loaders leave in its layer (module doc)."""
    k = int(ckpt.shards[0].weight.shape[1])
    single_rank()
    with set_current_vllm_config(VllmConfig()):
        layer, shard_ids = vllm_layer(ckpt.logical_shards, k)
        param = _fp8_parameters(layer, ckpt, k)
    params = dict(layer.named_parameters())
    ids: tuple[Any, ...] = (None,) if ckpt.fused_on_disk else shard_ids
    with torch.no_grad():
        for shard, shard_id in zip(ckpt.shards, ids, strict=True):
            for field in ("weight", "weight_scale", "input_scale"):
                tensor = getattr(shard, field)
                if tensor is None or field not in params:
                    continue
                target = params[field]
                # an unfused layer's loader takes no shard id
                extra = () if type(layer) is ColumnParallelLinear else (shard_id,)
                target.weight_loader(target, tensor, *extra)
    weight_scale = layer.weight_scale.data.clone()
    if param.rows == "row":
        weight_scale = weight_scale.reshape(-1)
    input_scale = None
    if "input_scale" in params:
        input_scale = layer.input_scale.data.clone().float().reshape(-1)
    unloaded: tuple[int, ...] = ()
    if param.rows == "slot":
        unloaded = tuple(int(i) for i in (~loaded_slots(weight_scale.float())).nonzero())
    return LoadState(
        scheme=ckpt.scheme,
        codes=layer.weight.data.view(torch.uint8).clone(),
        weight_scale=weight_scale,
        input_scale=input_scale,
        bias=None if ckpt.bias is None else ckpt.bias.float().clone(),
        widths=ckpt.logical_widths,
        target_format=target_format,
        unloaded=unloaded,
    )
