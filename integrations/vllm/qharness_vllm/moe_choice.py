"""Whether vLLM has an FP8 MoE kernel for a scheme on this machine, from vLLM's own tables.

vLLM picks an FP8 MoE kernel in ``fused_moe.oracle.fp8.select_fp8_moe_backend``: each
backend's kernel classes say whether they run on the current device
(``_supports_current_device``) and whether they take the (weight, activation) quantization
keys of the checkpoint (``_supports_quant_scheme``). On a CPU where no class agrees, vLLM
0.32 does not refuse at selection: it returns backend ``NONE`` and loading fails later, in
``process_weights_after_loading``, with ``ValueError: Unsupported FP8 MoE backend: NONE``
(docs/ENGINE-FINDINGS.md). `fp8_moe_kernel_choice` asks the same two questions of every
kernel class, so the model suite can skip such a checkpoint with vLLM's reasons instead of
starting an engine that cannot load it.
"""

from __future__ import annotations

# harness scheme -> vLLM's (weight key, activation key) names, as compressed-tensors' FP8
# MoE method maps the checkpoint's strategies (compressed_tensors_moe_w8a8_fp8.py)
FP8_MOE_KEYS: dict[str, tuple[str, str]] = {
    "fp8_per_channel": ("kFp8StaticChannelSym", "kFp8DynamicTokenSym"),
    "fp8_per_tensor": ("kFp8StaticTensorSym", "kFp8StaticTensorSym"),
    "fp8_per_block": ("kFp8Static128BlockSym", "kFp8Dynamic128Sym"),
}
# the backends vLLM puts first on a CPU (``_get_priority_backends``); named in the reason
CPU_BACKENDS = ("CPU_W8A8", "CPU")


def _kernel_classes(backend: object) -> list[type]:
    from vllm.model_executor.layers.fused_moe.oracle.fp8 import backend_to_kernel_cls

    try:
        return list(backend_to_kernel_cls(backend))
    except Exception:  # a backend whose module does not import on this build runs nowhere here
        return []


def _ask(method: object, *args: object) -> bool:
    try:
        return bool(method(*args))  # type: ignore[operator]
    except Exception:
        return False


def fp8_moe_kernel_choice(scheme: str) -> tuple[str | None, str]:
    """(the kernel class vLLM can pick for ``scheme``'s MoE here, or None; why not)."""
    from vllm.model_executor.layers.fused_moe.oracle.fp8 import Fp8MoeBackend
    from vllm.model_executor.layers.quantization.utils import quant_utils

    if scheme not in FP8_MOE_KEYS:
        return None, f"no vLLM FP8 MoE quantization keys for {scheme}"
    weight_key, act_key = (getattr(quant_utils, name) for name in FP8_MOE_KEYS[scheme])
    why = []
    for backend in Fp8MoeBackend:
        for cls in _kernel_classes(backend):
            device = _ask(cls._supports_current_device)
            keys = _ask(cls._supports_quant_scheme, weight_key, act_key)
            if device and keys:
                return cls.__name__, ""
            if backend.value in CPU_BACKENDS:
                missing = [w for w, ok in (("this CPU", device), (scheme, keys)) if not ok]
                why.append(f"{backend.value} ({cls.__name__}): not for {' nor '.join(missing)}")
    return None, (
        "no FP8 MoE kernel supports this device and scheme: "
        + "; ".join(why)
        + " (loading it anyway fails: backend NONE, docs/ENGINE-FINDINGS.md)"
    )
