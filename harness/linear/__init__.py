"""The linear suite's cases and goldens, and the scheme x path support matrix.

Modules, each with its one job:

- ``cases``: Case tables (shapes, output dtypes), golden builders for the linear suite, and
  loading a golden into a `QuantizedLinear` + input (the MX scale edge-case blocks are
  `harness.quantizers.mx_edge_cases`).
- ``designs``: The linear input designs built from `harness.core.hard_inputs` (see
  ``hard_inputs`` in `harness.core`).
- ``operands``, ``operand_designs``: The four bit-exact operand checks and the designed
  operand inputs (see ``operands`` in `harness.paths`).
- ``paths/``: The linear path registry, `emulated` and `native` (see ``base``, ``dispatch``,
  ``findings`` in `harness.paths`).
- ``call_cases``: The same layer called two ways that must give the same bits: A, B, A
  (nothing a call leaves behind changes a later one) and [batch, seq, K] activations.
- ``matrix``: The scheme x path matrix and the linear dispatch report.
- ``checks``: The linear suite's checks of one path's output, named and run in a fixed
  order: `finite`, `vs_golden`, `rounding_interval`, `bits_vs_emulated`, `vs_emulated`,
  `sqnr_floor` (docs/SUITES.md).
- ``special_values``: The rules of `suites/test_special_values.py`: the expected row per
  format and path for a NaN or +-Inf activation element (MX block scale 0xFF, non-finite
  dynamic scales, static NaN code or saturation of Inf; an Inf block a path's declared
  convention saturates).
- ``repro``: What a linear bundle holds, and re-running it through any path with the suite's
  check.
"""
