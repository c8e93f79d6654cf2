"""Loader pipelines: a checkpoint -> the runtime layer a path executes, by named transforms.

A loader is an ordered tuple of transforms (harness.loading.transforms). Before the first one runs,
the checkpoint is validated and its shards are fused into one state the way engines load
them (one scale slot per shard, initialized to a sentinel, filled from the file); after the
last one, the result must be a layer in the platform's FP8 flavour with kernel-shaped
scales, or `LoadError` is raised. Nothing is returned half-done and the checkpoint's
tensors are never modified.

The ``fp8`` and ``quark`` loaders run flavour normalization and shard requantization in
opposite orders, as two real engines do; they must still agree bit for bit. Other packages
add loaders through the ``qharness.loaders`` entry-point group (an object or a zero-argument
callable returning a `Loader`), as paths do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from harness.core.quantize import QuantizedLinear, QuantizedTensor, scale_grid
from harness.core.schemes import WHOLE, Scheme
from harness.loading.checkpoint import LinearCheckpoint, validate_checkpoint
from harness.loading.transforms import (
    SCALE_SLOT_SENTINEL,
    LoadError,
    LoadState,
    Transform,
    contiguous_kernel_layout,
    conversion_problem,
    merge_input_scales,
    normalize_to_platform_fp8,
    requantize_with_max_scale,
    scales_to_tile_grid,
)
from harness.paths.base import Support
from harness.paths.findings import KnownFinding
from harness.registry import Registry

ENTRY_POINT_GROUP = "qharness.loaders"

# Scheme families these loaders read (FP8 per-tensor/channel/block scales in fp32).
LOADABLE_FAMILIES: frozenset[str] = frozenset({"fp8"})


# A checkpoint -> the fused state the first transform gets: the engine's weight loader.
Fuse = Callable[[LinearCheckpoint, str], LoadState]


@dataclass(frozen=True)
class Loader:
    """A named, ordered pipeline of transforms.

    ``fuse`` loads the checkpoint's tensors into the fused layer (None: `fuse_shards`, the
    harness's shard-by-shard copy; an engine's loader may load through the engine's own
    weight loaders). ``known_findings``: documented engine findings a load may raise for
    (`harness.paths.findings`, suite "loading"), matched on the case's fields.
    """

    name: str
    transforms: tuple[Transform, ...]
    description: str
    fuse: Fuse | None = None
    known_findings: Sequence[KnownFinding] = ()

    @property
    def steps(self) -> tuple[str, ...]:
        return tuple(t.__name__ for t in self.transforms)

    def supports(self, scheme: Scheme, target_format: str) -> Support:
        """Whether this loader can bring ``scheme`` checkpoints to a ``target_format`` platform."""
        if scheme.family not in LOADABLE_FAMILIES:
            return Support.no(
                f"loader {self.name}: reads {sorted(LOADABLE_FAMILIES)} schemes, "
                f"not {scheme.family} ({scheme.name})"
            )
        problem = conversion_problem(scheme, target_format)
        if problem is not None:
            return Support.no(f"loader {self.name}: {problem} (see docs/LOADING.md)")
        return Support.yes()

    def load(self, ckpt: LinearCheckpoint, target_format: str) -> LoadedLayer:
        """Validate, fuse, run every transform, check the result. Raises, never half-loads."""
        validate_checkpoint(ckpt)
        support = self.supports(ckpt.scheme, target_format)
        if not support.ok:
            raise LoadError(support.reason)
        state = (self.fuse or fuse_shards)(ckpt, target_format)
        for transform in self.transforms:
            state = transform(state)
        return finish(state, ckpt)

    def with_transforms(self, transforms: tuple[Transform, ...], name: str) -> Loader:
        return replace(
            self, name=name, transforms=transforms, description=f"{self.description} (modified)"
        )


@dataclass(frozen=True)
class LoadedLayer:
    """A loaded layer plus what loading found out about the shards."""

    layer: QuantizedLinear
    widths: tuple[int, ...]
    unloaded: tuple[int, ...]  # zero-width shards whose scale slot was never loaded


# ----------------------------------------------------------------- before and after
def _fused_weight_scale(ckpt: LinearCheckpoint) -> torch.Tensor:
    """Shard scales laid out as engines hold them for the fused layer."""
    spec = ckpt.scheme.weight
    k = int(ckpt.shards[0].weight.shape[1])
    if spec.block == (WHOLE, WHOLE):
        slots = torch.full((len(ckpt.shards),), SCALE_SLOT_SENTINEL)
        for i, shard in enumerate(ckpt.shards):
            if shard.weight_scale is not None:
                slots[i] = shard.weight_scale.reshape(())
        return slots
    if spec.block == (1, WHOLE):
        return torch.cat([_shard_scale(ckpt, i).reshape(-1) for i in range(len(ckpt.shards))])
    rows = spec.block[0]
    for shard in ckpt.shards:
        if ckpt.fused and (rows is WHOLE or shard.width % rows):
            raise LoadError(
                f"{ckpt.source}: shard {ckpt.tensor_name(shard, 'weight')} of width "
                f"{shard.width} does not fill whole {spec.granularity} scale blocks; its "
                "blocks would straddle shards"
            )
    grids = []
    for i, shard in enumerate(ckpt.shards):
        grid_cols = scale_grid(spec, (max(shard.width, 1), k))[1]
        grids.append(_shard_scale(ckpt, i).reshape(-1, grid_cols))
    return torch.cat(grids, dim=0)


def _shard_scale(ckpt: LinearCheckpoint, i: int) -> torch.Tensor:
    scale = ckpt.shards[i].weight_scale
    return torch.zeros(0) if scale is None else scale.float()


def fuse_shards(ckpt: LinearCheckpoint, target_format: str) -> LoadState:
    """Load the shards into fused tensors: the engine's weight loader, before any transform."""
    codes = torch.cat([ckpt.shard_codes(s) for s in ckpt.shards], dim=0).clone()
    input_scale = None
    act = ckpt.scheme.activation
    if act is not None and not act.dynamic:
        input_scale = torch.full((len(ckpt.shards),), SCALE_SLOT_SENTINEL)
        for i, shard in enumerate(ckpt.shards):
            if shard.input_scale is not None:
                input_scale[i] = shard.input_scale.reshape(())
    return LoadState(
        scheme=ckpt.scheme,
        codes=codes,
        weight_scale=_fused_weight_scale(ckpt),
        input_scale=input_scale,
        bias=None if ckpt.bias is None else ckpt.bias.float().clone(),
        widths=ckpt.widths,
        target_format=target_format,
    )


def finish(state: LoadState, ckpt: LinearCheckpoint) -> LoadedLayer:
    """Check the pipeline's result is what paths run, and wrap it as a `QuantizedLinear`."""
    scheme = state.scheme
    where = f"{ckpt.source} ({ckpt.prefix})"
    if scheme.weight.format != state.target_format:
        raise LoadError(
            f"{where}: the pipeline left the weight in {scheme.weight.format}, but the platform "
            f"runs {state.target_format}; a flavour normalization step is missing"
        )
    missing = [i for i in state.unloaded if state.widths[i]]
    if missing:
        names = [ckpt.logical_name(i, "weight_scale") for i in missing]
        raise LoadError(f"{where}: weight scale slots never loaded for {names}")
    expected = scale_grid(scheme.weight, tuple(state.codes.shape))
    if tuple(state.weight_scale.shape) != expected:
        raise LoadError(
            f"{where}: weight scale shape {tuple(state.weight_scale.shape)} after loading, the "
            f"kernel needs the {scheme.weight.granularity} grid {expected}"
        )
    static = scheme.activation is not None and not scheme.activation.dynamic
    if static and (state.input_scale is None or tuple(state.input_scale.shape) != (1, 1)):
        shape = None if state.input_scale is None else tuple(state.input_scale.shape)
        raise LoadError(f"{where}: static input scale has shape {shape} after loading, not (1, 1)")
    if not state.codes.is_contiguous():
        raise LoadError(f"{where}: weight codes are not contiguous after loading")
    weight = QuantizedTensor(state.codes, state.weight_scale, scheme.weight)
    layer = QuantizedLinear(scheme, weight, state.input_scale if static else None, state.bias)
    return LoadedLayer(layer, state.widths, state.unloaded)


# ----------------------------------------------------------------------- registry
FP8_LOADER = Loader(
    "fp8",
    (
        normalize_to_platform_fp8,
        requantize_with_max_scale,
        merge_input_scales,
        scales_to_tile_grid,
        contiguous_kernel_layout,
    ),
    "FP8 checkpoints: normalize the flavour first, then requantize fused shards",
)
QUARK_LOADER = Loader(
    "quark",
    (
        requantize_with_max_scale,
        merge_input_scales,
        normalize_to_platform_fp8,
        scales_to_tile_grid,
        contiguous_kernel_layout,
    ),
    "Quark FP8 checkpoints: requantize fused shards first, then normalize the flavour",
)
BUILTIN_LOADERS: tuple[Loader, ...] = (FP8_LOADER, QUARK_LOADER)

# Pairs of steps whose order does not change the result, and why (docs/LOADING.md has the
# derivation). tests/loading/test_loader_order.py swaps every pair of every loader: a pair listed
# here must give bit-identical layers, any other pair must make the invariant check fail.
COMMUTING_STEPS: dict[frozenset[str], str] = {
    frozenset({"normalize_to_platform_fp8", "requantize_with_max_scale"}): (
        "fn->fnuz keeps every value (codes mean half, scales double) and requantization "
        "works on values in the codes' current format"
    ),
    frozenset({"normalize_to_platform_fp8", "merge_input_scales"}): (
        "max(2 s_i) = 2 max(s_i) exactly; unloaded slots are excluded either way"
    ),
    frozenset({"requantize_with_max_scale", "merge_input_scales"}): "disjoint tensors",
    frozenset({"merge_input_scales", "scales_to_tile_grid"}): "disjoint tensors",
    frozenset({"normalize_to_platform_fp8", "scales_to_tile_grid"}): (
        "doubling scales does not depend on their shape"
    ),
    frozenset({"contiguous_kernel_layout", "requantize_with_max_scale"}): (
        "requantization concatenates shards into a new contiguous tensor"
    ),
    frozenset({"contiguous_kernel_layout", "normalize_to_platform_fp8"}): (
        "elementwise steps keep contiguity"
    ),
    frozenset({"contiguous_kernel_layout", "merge_input_scales"}): "disjoint tensors",
    frozenset({"contiguous_kernel_layout", "scales_to_tile_grid"}): (
        "reshaping a contiguous scale keeps it contiguous"
    ),
}


# All loaders by name: built-ins first, then entry points. Names must be unique.
loaders: Registry[Loader] = Registry(
    ENTRY_POINT_GROUP, Loader, "loader", "docs/LOADING.md", lambda: BUILTIN_LOADERS
)


def get_loader(name: str) -> Loader:
    return loaders.get(name)
