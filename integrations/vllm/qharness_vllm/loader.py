"""vLLM's FP8 post-load weight processing as a qharness loader.

The checkpoint's tensors go into vLLM's own fused layer through its ``weight_loader_v2``
(`qharness_vllm.weight_loading`: per-shard tensors with their shard ids, a layer fused on
disk with none), in their stored dtypes. The two post-load steps that matter are vLLM's own
functions from ``quantization/utils/w8a8_utils.py``, called on the fused tensors exactly as
vLLM's FP8 linear method calls them: `normalize_e4m3fn_to_e4m3fnuz` when the platform is fnuz, then
`requantize_with_max_scale` for per-tensor weights. On an e4m3fnuz target the platform
switches of a ROCm gfx942 runner are simulated and the quant kernel that requantization
calls is the adapter's (qharness_vllm.platform). The harness's own steps do the rest
(input-scale merge, scale grid, contiguity), as vLLM's layer does after these two.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from vllm.model_executor.layers.quantization.utils import w8a8_utils

from harness import (
    WHOLE,
    FindingCase,
    KnownFinding,
    Loader,
    LoadState,
    QuantSpec,
    Scheme,
    Support,
    contiguous_kernel_layout,
    get_scheme,
    merge_input_scales,
    scales_to_tile_grid,
)
from qharness_vllm.platform import platform_for
from qharness_vllm.weight_loading import load_with_vllm

TORCH_FP8 = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
FNUZ_BOUND = 224.0  # vLLM's e4m3fnuz bound (get_fp8_min_max)


def _fnuz(spec: QuantSpec | None) -> QuantSpec | None:
    # e4m3fn codes relabelled as e4m3fnuz mean half as much: 448 becomes 224.
    return None if spec is None else replace(spec, format="e4m3fnuz", clamp_max=FNUZ_BOUND)


def vllm_normalize_e4m3fn_to_e4m3fnuz(state: LoadState) -> LoadState:
    """vLLM's normalization, run when the target platform is fnuz (as vLLM gates it)."""
    if state.target_format != "e4m3fnuz" or state.scheme.weight.format != "e4m3fn":
        return state
    weight = state.codes.clone().view(torch.float8_e4m3fn)
    with platform_for(state.target_format):
        w, w_scale, in_scale = w8a8_utils.normalize_e4m3fn_to_e4m3fnuz(
            weight,
            state.weight_scale.clone(),
            None if state.input_scale is None else state.input_scale.clone(),
        )
    scheme: Scheme = replace(
        state.scheme, weight=_fnuz(state.scheme.weight), activation=_fnuz(state.scheme.activation)
    )
    return replace(
        state,
        scheme=scheme,
        codes=w.view(torch.uint8),
        weight_scale=w_scale,
        input_scale=in_scale,
    )


def vllm_requantize_with_max_scale(state: LoadState) -> LoadState:
    """vLLM's requantization of fused per-tensor shards to their largest scale."""
    if state.scheme.weight.block != (WHOLE, WHOLE):
        return state  # vLLM requantizes per-tensor weights only
    weight = state.codes.clone().view(TORCH_FP8[state.scheme.weight.format])
    with platform_for(state.target_format):
        max_scale, w = w8a8_utils.requantize_with_max_scale(
            weight, state.weight_scale.clone(), list(state.widths)
        )
    return replace(state, codes=w.view(torch.uint8), weight_scale=max_scale.reshape(1).float())


# integrations/vllm/findings/FINDINGS.md: vllm_fnuz_e8m0_scale_double.py reproduces it
FNUZ_E8M0_DOUBLE = (
    "vLLM's normalize_e4m3fn_to_e4m3fnuz doubles weight_scale with a plain multiply "
    "(weight_scale * 2.0), which torch does not implement for float8_e8m0fnu: a checkpoint "
    "whose E8M0 (UE8M0) scales vLLM holds in their stored dtype cannot be loaded on an "
    "e4m3fnuz platform (vllm-project/vllm#41961; fix vllm-project/vllm#42247 open)"
)


def _fnuz_with_e8m0_scales(case: FindingCase) -> bool:
    """An e4m3fnuz target and weight scales stored as E8M0 bytes: the loads it explains."""
    return case.flavour == "e4m3fnuz" and get_scheme(case.scheme).weight.scale_fmt.name == "e8m0"


LOADER_FINDINGS = (
    KnownFinding(FNUZ_E8M0_DOUBLE, suites=frozenset({"loading"}), when=_fnuz_with_e8m0_scales),
)


TAIL = (merge_input_scales, scales_to_tile_grid, contiguous_kernel_layout)


@dataclass(frozen=True)
class VllmLoader(Loader):
    """A loader for the checkpoints vLLM's FP8 method reads: e4m3fn weights."""

    def supports(self, scheme: Scheme, target_format: str) -> Support:
        if scheme.weight.format != "e4m3fn":
            return Support.no(
                f"loader {self.name}: vLLM's FP8 method reads e4m3fn checkpoints and has no "
                f"{scheme.weight.format} -> {target_format} conversion"
            )
        return super().supports(scheme, target_format)


def vllm_fp8_loader() -> Loader:
    """vLLM's order (its FP8 linear method): normalize for fnuz first, then requantize."""
    return VllmLoader(
        "vllm_fp8",
        (vllm_normalize_e4m3fn_to_e4m3fnuz, vllm_requantize_with_max_scale, *TAIL),
        "vLLM's weight_loader_v2 into its fused layer, then its FP8 post-load processing: "
        "normalize_e4m3fn_to_e4m3fnuz, then requantize_with_max_scale",
        fuse=load_with_vllm,
        known_findings=LOADER_FINDINGS,
    )


def vllm_fp8_requantize_first_loader() -> Loader:
    """The same two vLLM functions in the other order (not registered; see the self-test)."""
    return VllmLoader(
        "vllm_fp8_requantize_first",
        (vllm_requantize_with_max_scale, vllm_normalize_e4m3fn_to_e4m3fnuz, *TAIL),
        "vLLM's two FP8 post-load steps with requantize_with_max_scale first",
        fuse=load_with_vllm,
        known_findings=LOADER_FINDINGS,
    )
