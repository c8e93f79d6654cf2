"""Weight memory of a loaded model against the bytes its quantized tensors must take.

What a quantized layer must hold: its codes (one byte per FP8 element), its scales (float32,
one per tile of the scheme's grid, per shard), a static input scale per shard and its bias
in the model dtype. A loader that also keeps a dequantized copy holds at least 2 bytes more
per weight element (bf16; 4 in float32), so the check allows one byte per element on top of
what must be held (scale layouts and padding are far below that) and fails a copy.
Non-quantized parameters (embeddings, lm_head, norms) count at their float checkpoint size.
Only parameters count: buffers (rotary caches) are not weights; a copy kept outside
parameters is not seen here (docs/MODELS.md).
"""

from __future__ import annotations

from typing import Any

from harness.core.checks import CheckResult, failed, passed
from harness.core.quantize import scale_grid
from harness.models.files import ModelCheckpoint, layer_modules

SCALE_BYTES = 4  # float32 scales


def required_layer_bytes(ckpt: ModelCheckpoint, layer: str) -> tuple[int, int]:
    """(bytes the layer must hold, its weight element count)."""
    total, elements = 0, 0
    spec = ckpt.scheme.weight
    for module in layer_modules(ckpt)[layer]:
        w = ckpt.tensors[f"{module}.weight"]
        rows, cols = scale_grid(spec, w.shape)
        elements += w.numel()
        total += w.numel() + rows * cols * SCALE_BYTES
        if f"{module}.input_scale" in ckpt.tensors:
            total += SCALE_BYTES
        bias = ckpt.tensors.get(f"{module}.bias")
        if bias is not None:
            total += bias.numel() * bias.element_size()
    return total, elements


def weight_memory_check(ckpt: ModelCheckpoint, capture: dict[str, Any]) -> CheckResult:
    """vLLM's parameter bytes, per quantized layer and for the model, within the budget."""
    name = "weight_memory"
    over: list[str] = []
    must_total = allowed_total = 0
    for layer in layer_modules(ckpt):
        must, elements = required_layer_bytes(ckpt, layer)
        allowed = must + elements  # one byte per element of slack; a bf16 copy needs 2
        must_total += must
        allowed_total += allowed
        held = sum(
            t.numel() * t.element_size() for t in capture["layers"][layer]["tensors"].values()
        )
        if held > allowed:
            over.append(f"{layer}: {held} bytes held, {must} needed, at most {allowed} allowed")
    quantized = {
        f"{m}.{f}"
        for ms in layer_modules(ckpt).values()
        for m in ms
        for f in ("weight", "weight_scale", "input_scale", "bias")
    }
    float_bytes = sum(
        t.numel() * t.element_size() for n, t in ckpt.tensors.items() if n not in quantized
    )
    held_total = int(capture["param_bytes"])
    metrics = {
        "weight_bytes": held_total,
        "required_weight_bytes": must_total + float_bytes,
        "allowed_weight_bytes": allowed_total + float_bytes,
    }
    if held_total > allowed_total + float_bytes:
        over.append(
            f"model: {held_total} parameter bytes, at most {allowed_total + float_bytes} allowed"
        )
    if over:
        return failed(name, "; ".join(over[:4]), None, **metrics)
    return passed(name, **metrics)
