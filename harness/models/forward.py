"""The harness's emulated forward of a quantized checkpoint, and model-level comparisons.

`reference_logits` runs the model's architecture (``transformers``, eager attention) in
float64 on the float checkpoint's weights: as they are (the unquantized model), or with
every quantized layer's weight replaced by what the quantized checkpoint's codes and scales
stand for (exact in float64) and its input quantized by the harness's quantizer under the
engine's declared conventions, with the checkpoint's static input scale where it has one
(the emulated model). Everything else (norms, attention, rotary, SiLU) runs in float64, so
what remains between an engine and the emulated model is the engine's own arithmetic.

`compare_logits` gives the numbers recorded per model and scheme: SQNR and top-1 agreement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.core.compare import sqnr_db
from harness.core.quantize import QuantizedTensor, quantize_activation, scale_grid
from harness.models.files import ModelCheckpoint
from harness.paths.base import with_activation_conventions


def dequantized_weight(ckpt: ModelCheckpoint, module: str) -> torch.Tensor:
    """What a checkpoint module's codes and scales stand for, in float64 (exact)."""
    spec = ckpt.scheme.weight
    codes = ckpt.tensors[f"{module}.weight"].contiguous().view(torch.uint8)
    scale = ckpt.tensors[f"{module}.weight_scale"].float()
    grid = scale.reshape(scale_grid(spec, codes.shape))
    return QuantizedTensor(codes, grid, spec).dequantize(torch.float64)


def _fake_quantize_input(ckpt: ModelCheckpoint, module: str, conventions: frozenset[str]) -> Any:
    scheme = with_activation_conventions(ckpt.scheme, conventions)
    static = ckpt.tensors.get(f"{module}.input_scale")
    scale = None if static is None else static.float().reshape(1, 1)

    def hook(mod: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        x = args[0]
        flat = x.reshape(-1, x.shape[-1])
        xq = quantize_activation(flat, scheme, scale)
        out = flat if xq is None else xq.dequantize(torch.float64)
        return (out.reshape(x.shape).to(x.dtype), *args[1:])

    return hook


def reference_logits(
    float_folder: Path,
    prompts: list[list[int]],
    ckpt: ModelCheckpoint | None = None,
    conventions: frozenset[str] = frozenset(),
) -> list[torch.Tensor]:
    """float64 logits [T, V] per prompt: the unquantized model (``ckpt`` None) or the
    emulated quantized one (see the module doc). Needs ``transformers``."""
    from transformers import AutoModelForCausalLM

    net = AutoModelForCausalLM.from_pretrained(
        float_folder, torch_dtype=torch.float64, attn_implementation="eager"
    )
    net.eval()
    if ckpt is not None:
        with torch.no_grad():
            for module in ckpt.quantized:
                layer = net.get_submodule(module)
                layer.weight.copy_(dequantized_weight(ckpt, module))
                layer.register_forward_pre_hook(_fake_quantize_input(ckpt, module, conventions))
    out = []
    with torch.no_grad():
        for ids in prompts:
            logits = net(input_ids=torch.tensor([ids])).logits[0]
            out.append(logits.double())
    return out


@dataclass(frozen=True)
class LogitComparison:
    sqnr_db: float
    top1_agreement: float  # fraction of positions whose argmax agrees
    positions: int


def compare_logits(reference: list[torch.Tensor], actual: list[torch.Tensor]) -> LogitComparison:
    ref = torch.cat([r.double() for r in reference])
    got = torch.cat([a.double() for a in actual])
    agree = (ref.argmax(dim=-1) == got.argmax(dim=-1)).double().mean()
    return LogitComparison(sqnr_db(ref, got), float(agree), int(ref.shape[0]))
