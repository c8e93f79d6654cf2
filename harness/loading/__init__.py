"""Checkpoint loading: the checkpoint files, post-load transforms, loaders, invariants
and cases.

Modules, each with its one job:

- ``checkpoint``: The checkpoint model (quantized weight, scales, optional input scale and
  bias, fused shards with their own scales, a quantization config naming method and scheme)
  and its safetensors files (float8 weights, config in `__metadata__`); bad input raises
  `CheckpointError` before anything loads.
- ``transforms``: Post-load weight transforms as pure functions on a `LoadState`: e4m3fn ->
  e4m3fnuz normalization, requantize-to-max for fused shards (with unloaded-slot handling),
  input-scale merge, scale grid, contiguity, MX scale layout.
- ``loaders``: Loaders as ordered tuples of transforms (`fp8`, `quark`, and the
  `qharness.loaders` entry-point group), shard fusing and result checks, the
  `COMMUTING_STEPS` table of step pairs whose order provably does not matter.
- ``invariants``, ``cases``: The invariant checks, the named cases (0x80 codes, very
  different shard scales, zero-width shard, unfused) and the `loading/<scheme>/<case>`
  goldens used by `suites/test_loading.py`.
- ``checks``: The loading suite's named checks: the loaded shards (runtime format, shards
  against the checkpoint), loaders agreeing with each other, and the output through a path
  (finite, bias applied once, within the golden's bound; `rounding_interval` /
  `bits_vs_emulated` from `harness.core.checks`, one interval from the path's declared
  numerics).
- ``fused_nvfp4``: Fused NVFP4 layers (q/k/v, gate/up): designed checkpoints with shared
  and unequal per-shard global scales, the harness's loader (refuses unequal globals) and
  the invariants: one global for the layer, every shard exactly the checkpoint's.
"""

from harness.loading.loaders import LoadedLayer, Loader, get_loader, loaders

__all__ = ["LoadedLayer", "Loader", "get_loader", "loaders"]
