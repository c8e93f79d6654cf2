"""What this adapter supplies or simulates so that vLLM's FP8 code runs on a CPU.

1. Kernels. The CPU build of vLLM declares ``_C::static_scaled_fp8_quant``,
   ``_C::dynamic_scaled_fp8_quant`` and ``_C::dynamic_per_token_scaled_fp8_quant`` with an
   empty schema and no kernel, so ``vllm._custom_ops.scaled_fp8_quant`` cannot run. `cpu_fp8_ops`
   binds Python implementations of those three ops on ``torch.ops._C`` for the duration of a
   block. Their arithmetic is this adapter's model of vLLM's CUDA kernels (scale reciprocal in
   float32, ``x * (1/scale)``, clamp to the platform's FP8 bound, cast; dynamic per-token
   scales bounded below by 1/(fp8_max*512); dynamic per-tensor scale amax/fp8_max), not vLLM's
   code: a finding in them is a finding in this adapter. Everything around them (dtype and
   bound selection, shapes, the callers) is vLLM's own.
2. Platform switches. `rocm_gfx942` makes ``current_platform.fp8_dtype()`` return
   ``float8_e4m3fnuz`` and ``current_platform.is_fp8_fnuz()`` return True, as they do on a ROCm
   gfx942 (MI300) runner, so vLLM's fnuz branches (224 bound, normalization) run. Nothing else
   of the ROCm platform is simulated: no aiter, no hipBLASLt, no ROCm kernels.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from vllm.model_executor.layers.quantization.utils.quant_utils import get_fp8_min_max
from vllm.platforms import current_platform

OPS = ("static_scaled_fp8_quant", "dynamic_scaled_fp8_quant", "dynamic_per_token_scaled_fp8_quant")


def _store(output: torch.Tensor, scaled: torch.Tensor) -> None:
    lo, hi = get_fp8_min_max()
    rows = scaled.shape[0]
    output[:rows].copy_(scaled.clamp(lo, hi).to(output.dtype))


def _static(
    output: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, group_shape: Any = None
) -> None:
    if scale.numel() != 1:
        raise NotImplementedError("adapter CPU kernel: per-tensor static scales only")
    inverse = torch.reciprocal(scale.float().reshape(()))
    _store(output, x.float() * inverse)


def _dynamic(output: torch.Tensor, x: torch.Tensor, scale: torch.Tensor) -> None:
    _, fp8_max = get_fp8_min_max()
    scale.copy_((x.float().abs().amax() / fp8_max).reshape(scale.shape))
    _static(output, x, scale)


def _dynamic_per_token(
    output: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, scale_ub: torch.Tensor | None
) -> None:
    _, fp8_max = get_fp8_min_max()
    amax = x.float().abs().amax(dim=-1, keepdim=True)
    if scale_ub is not None:
        amax = amax.clamp(max=scale_ub.float())
    floor = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(
        fp8_max * 512.0, dtype=torch.float32
    )
    scale.copy_(torch.maximum(amax / fp8_max, floor))
    _store(output, x.float() * torch.reciprocal(scale))


IMPLEMENTATIONS = {
    "static_scaled_fp8_quant": _static,
    "dynamic_scaled_fp8_quant": _dynamic,
    "dynamic_per_token_scaled_fp8_quant": _dynamic_per_token,
}


@contextmanager
def cpu_fp8_ops() -> Iterator[None]:
    """Bind the adapter's CPU implementations of vLLM's FP8 quant ops on ``torch.ops._C``."""
    namespace = torch.ops._C
    saved = {name: namespace.__dict__.get(name) for name in OPS}
    try:
        for name, fn in IMPLEMENTATIONS.items():
            setattr(namespace, name, fn)
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                namespace.__dict__.pop(name, None)
            else:
                setattr(namespace, name, old)


@contextmanager
def rocm_gfx942() -> Iterator[None]:
    """``current_platform`` reports e4m3fnuz FP8, as on a ROCm gfx942 runner (see module doc)."""
    saved = {k: current_platform.__dict__.get(k) for k in ("fp8_dtype", "is_fp8_fnuz")}
    try:
        current_platform.fp8_dtype = lambda: torch.float8_e4m3fnuz  # type: ignore[method-assign]
        current_platform.is_fp8_fnuz = lambda: True  # type: ignore[method-assign]
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                current_platform.__dict__.pop(k, None)
            else:
                setattr(current_platform, k, v)


@contextmanager
def platform_for(fp8_format: str) -> Iterator[None]:
    """The platform switches of a runner whose FP8 flavour is ``fp8_format``, plus the ops."""
    with cpu_fp8_ops():
        if fp8_format == "e4m3fnuz":
            with rocm_gfx942():
                yield
        else:
            yield
