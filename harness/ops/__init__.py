"""Thin glue over torch kernels (block-scaled and grouped GEMMs): argument layouts only,
no policy; shared by the paths and the capability probes.

Modules, each with its one job:

- ``block_scaled``: The scale layouts of `F.scaled_mm` block-wise FP8 and MX (the one MX
  swizzle), shared by the `native` linear path and the probes (see ``base``, ``dispatch``,
  ``findings`` in `harness.paths`).
- ``matmul``: Float32 matmuls as the error bounds assume them (the linear and MoE emulated
  paths).
- ``grouped``: Thin, contract-checked calls into torch's grouped GEMM ops, shared by the
  capability probes and the `native` MoE kernels (`harness.moe.paths`), so a probe that
  passes proves the exact call the suites make.
"""
