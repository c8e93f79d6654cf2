"""Fused NVFP4 layers: the global scale their shards share, and whether a loader keeps it.

An NVFP4 weight is E2M1 codes times E4M3 block scales (one per 16 along K) times one float32
global scale per tensor. A fused layer (q/k/v, gate/up) is one GEMM whose kernel reads one
global for the whole layer, so its shards must share one: llm-compressor links the fused
shards' weight observers so they get the same global at calibration
(`llmcompressor.observers.helpers.fuse_weight_observers`: "vLLM requires that fused layers
(Q/K/V attention, gate/up MLP) share the same global_scale"). A checkpoint whose shards
were quantized each on its own carries a global per shard; a loader that takes one of them
for the layer and keeps the block scales serves every other shard multiplied by the ratio
of the two globals.

`fused_nvfp4_violations` holds a loaded layer to:

- ``global_shared``: the layer holds one global scale;
- ``shards_match_checkpoint``: every shard dequantizes (code * block scale * global, in
  float64) to what the checkpoint's shard stands for, exactly, or within the relative
  float32 rounding the loader declares for its global (`LoadedNvfp4.rel_tolerance`: a
  loader that reads 1/g from the file and inverts it, as compressed-tensors loaders do).

A loader may refuse a checkpoint whose shards' globals differ (requantizing NVFP4 rounds
at both levels, block scale and element); serving it otherwise is a violation. The designs
(`FUSED_NVFP4_DESIGNS`) hold shared globals (the fused calibration, shards of different
amax), unequal globals (each shard calibrated on its own, amax ratios no power of two), and
shared globals with every other block in E4M3's subnormal range (`subnormal_block_scales`).
The harness's own loader is `harness_fuse`; engines' adapters load the same checkpoints
through their engine's loader and hold the result to the same invariants.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch

from harness.core.hard_inputs import subnormal_block_scales
from harness.core.inputs import scaled_normal
from harness.core.quantize import QuantizedTensor, quantize, tile_amax
from harness.core.scales import compute_global_scale
from harness.core.schemes import QuantSpec, get_scheme
from harness.loading.transforms import LoadError

QKV = (("q_proj", 64), ("k_proj", 32), ("v_proj", 32))
GATE_UP = (("gate_proj", 96), ("up_proj", 96))
K = 128  # eight NVFP4 blocks per row


def nvfp4_weight_spec() -> QuantSpec:
    """NVFP4's weight: E2M1 codes, 1x16 E4M3 block scales under a float32 global."""
    return get_scheme("w_nvfp4").weight


@dataclass(frozen=True)
class FusedDesign:
    """One fused NVFP4 checkpoint: its shards, their peaks, and how their globals are set."""

    name: str
    shows: str
    shards: tuple[tuple[str, int], ...]  # (name, rows)
    peaks: tuple[float, ...]  # each shard's largest magnitude
    shared_global: bool  # one global from all shards' amax (the fused calibration)
    tiny_blocks: bool = False  # every other block's E4M3 scale subnormal


FUSED_NVFP4_DESIGNS: tuple[FusedDesign, ...] = (
    FusedDesign(
        "shared_global",
        "the shared global kept, shards of different amax (a correct loader is exact)",
        QKV,
        (1.0, 0.37, 2.9),
        True,
    ),
    FusedDesign(
        "unequal_globals",
        "one shard's global taken for the layer with the block scales kept",
        QKV,
        (1.0, 0.37, 2.9),
        False,
    ),
    FusedDesign(
        "unequal_globals_gate_up",
        "one shard's global taken for the layer with the block scales kept (gate/up)",
        GATE_UP,
        (0.61, 1.0),
        False,
    ),
    FusedDesign(
        "shared_global_tiny_blocks",
        "E4M3 block scales in E4M3's subnormal range lost when shards are fused",
        QKV,
        (1.0, 0.37, 2.9),
        True,
        tiny_blocks=True,
    ),
)
FUSED_NVFP4_BY_NAME = {d.name: d for d in FUSED_NVFP4_DESIGNS}


@dataclass(frozen=True)
class FusedNvfp4Checkpoint:
    """A fused NVFP4 layer as a checkpoint stores it: per shard, codes [rows, K] (uint8
    E2M1), E4M3 block scales [rows, K/16] (their values, float32) and a [1, 1] global."""

    design: str
    names: tuple[str, ...]
    shards: tuple[QuantizedTensor, ...]

    @property
    def widths(self) -> tuple[int, ...]:
        return tuple(int(s.codes.shape[0]) for s in self.shards)

    @property
    def k(self) -> int:
        return int(self.shards[0].codes.shape[1])

    @property
    def globals_equal(self) -> bool:
        """Every shard's global is the same float32 value."""
        values = {float(_global(s)) for s in self.shards}
        return len(values) == 1

    def shard_values(self, i: int) -> torch.Tensor:
        """What shard ``i`` stands for: code * block scale * its global, in float64."""
        return self.shards[i].dequantize(torch.float64)


def _global(q: QuantizedTensor) -> torch.Tensor:
    if q.global_scale is None:
        raise ValueError("an NVFP4 shard has a global scale")
    return q.global_scale.reshape(())


@lru_cache(maxsize=8)
def fused_nvfp4_checkpoint(design: str) -> FusedNvfp4Checkpoint:
    """The design's checkpoint, seeded: shard weights scaled to their peaks, globals shared
    (from the largest shard amax, as the fused calibration sets them) or each shard's own."""
    d = FUSED_NVFP4_BY_NAME[design]
    spec = nvfp4_weight_spec()
    weights = []
    for (name, rows), peak in zip(d.shards, d.peaks, strict=True):
        w = scaled_normal(f"fused_nvfp4/{design}/{name}", rows, K, spec)
        weights.append(w * (peak / float(w.abs().max())))
    if d.tiny_blocks:  # one checkerboard over the fused rows, under the shared global
        fused = subnormal_block_scales(torch.cat(weights), spec)
        starts = [0]
        for _, rows in d.shards:
            starts.append(starts[-1] + rows)
        weights = [fused[a:b] for a, b in itertools.pairwise(starts)]
    shared = compute_global_scale(
        torch.stack([tile_amax(w, spec).max() for w in weights]).max(), spec
    )
    shards = tuple(
        quantize(w, spec, shared.reshape(1, 1)) if d.shared_global else quantize(w, spec)
        for w in weights
    )
    ckpt = FusedNvfp4Checkpoint(design, tuple(n for n, _ in d.shards), shards)
    if ckpt.globals_equal != d.shared_global:
        raise AssertionError(f"{design}: shard globals equal is {ckpt.globals_equal}")
    return ckpt


@dataclass(frozen=True)
class LoadedNvfp4:
    """A fused NVFP4 layer as loaded: the weight the kernel multiplies (code * block scale *
    global, float64 [N, K]), every global the layer holds, and the relative float32
    rounding of the global the loader declares (0: it keeps the checkpoint's global)."""

    values: torch.Tensor
    global_scales: torch.Tensor
    rel_tolerance: float = 0.0


def harness_fuse(ckpt: FusedNvfp4Checkpoint) -> LoadedNvfp4:
    """The harness's loader: shards concatenated under their one global; a checkpoint whose
    shards' globals differ is refused (`LoadError`)."""
    if not ckpt.globals_equal:
        shown = ", ".join(f"{float(_global(s)):.6g}" for s in ckpt.shards)
        raise LoadError(
            f"fused NVFP4 shards {', '.join(ckpt.names)} have different global scales "
            f"({shown}): the layer's kernel reads one, and requantizing NVFP4 block scales "
            "rounds twice"
        )
    values = torch.cat([ckpt.shard_values(i) for i in range(len(ckpt.shards))])
    return LoadedNvfp4(values, _global(ckpt.shards[0]).reshape(1).clone())


# loader name -> loader, run by the loading suite on every design (looked up at run time)
NVFP4_FUSERS: dict[str, Callable[[FusedNvfp4Checkpoint], LoadedNvfp4]] = {
    "harness": harness_fuse,
}


def global_violations(loaded: LoadedNvfp4) -> list[str]:
    """``global_shared``: the layer holds one global scale."""
    held = torch.unique(loaded.global_scales.double().reshape(-1))
    if held.numel() == 1 and bool(torch.isfinite(held).all()):
        return []
    shown = ", ".join(f"{float(v):.6g}" for v in held[:4])
    return [f"the layer holds {held.numel()} globals ({shown})"]


def shard_value_violations(ckpt: FusedNvfp4Checkpoint, loaded: LoadedNvfp4) -> list[str]:
    """``shards_match_checkpoint``: each shard's loaded values are the checkpoint's, within
    the loader's declared relative rounding of its global (NaN never matches)."""
    problems: list[str] = []
    start = 0
    for i, (name, width) in enumerate(zip(ckpt.names, ckpt.widths, strict=True)):
        got = loaded.values[start : start + width].double()
        start += width
        want = ckpt.shard_values(i)
        bad = ~((got - want).abs() <= loaded.rel_tolerance * want.abs())
        if not bool(bad.any()):
            continue
        nonzero = bad & (want != 0) & torch.isfinite(got)
        ratio = (got[nonzero] / want[nonzero]).median() if bool(nonzero.any()) else None
        shown = "" if ratio is None else f"; loaded/checkpoint median {float(ratio):.6g}"
        problems.append(
            f"{name}: {int(bad.sum())}/{bad.numel()} values differ from the checkpoint's "
            f"(relative tolerance {loaded.rel_tolerance:.3g}{shown})"
        )
    return problems


def fused_nvfp4_violations(ckpt: FusedNvfp4Checkpoint, loaded: LoadedNvfp4) -> list[str]:
    """Both invariants of the module doc, each violation prefixed with its check's name."""
    return [f"global_shared: {p}" for p in global_violations(loaded)] + [
        f"shards_match_checkpoint: {p}" for p in shard_value_violations(ckpt, loaded)
    ]
