"""The execution model linear and MoE paths share.

`Support`, `Numerics`, `PathBase`, `LinearPathBase`, the `LinearPath` protocol and
`KernelContract` (harness.paths.base), the dispatch-table type (harness.paths.dispatch)
and known engine findings (harness.paths.findings). The paths themselves live with their
domain: linear paths and their registry in `harness.linear.paths`, MoE paths in
`harness.moe.paths`; the registry type in `harness.registry`. Plugin authors import these
names from the front door, ``harness``.

Modules, each with its one job:

- ``base``, ``dispatch``, ``findings`` (with ``harness.registry``, ``harness.linear.paths``,
  ``harness.ops``, ``harness.linear.matrix``): The execution model linear and MoE share
  (`base`: `Support`, the `Numerics` declaration bounds are derived from,
  `PathBase`/`LinearPathBase` defaults read through one set of helpers (including an
  adapter's activation `conventions`, `activation_in_model_dtype` (the float32-activation
  suite skips a path that hands its engine model-dtype activations) and its
  `known_findings`), the `KernelContract` protocol; `dispatch`: the dispatch-table type,
  `choose`, `dispatch_problems` and `foreign_fp8_flavour` (a GPU path's refusal of a layer
  loaded for the e4m3 flavour its arch does not run: a table decides by name, and a
  normalized layer keeps its name); `findings`: `KnownFinding`, an adapter's documented
  engine finding declared by scheme and case fields (`FindingCase`: suite, scheme, linear
  problem, named case, quantizer format and scale mode), which the plugin's `xfail_known`
  (also behind `record_checks(..., known_finding=)`) turns into counted xfails);
  `harness/registry.py`: one `Registry` for paths, MoE paths and loaders, built-ins (made on
  first use, so no import builds a path or runs a probe) + entry points; the `LinearPath`
  protocol; `linear/paths/`: the linear registry, `emulated`; `native` (explicit
  `LINEAR_NATIVE_DISPATCH` table, checked against its kernel modes' contracts:
  `torch._scaled_mm` tensor-wise/row-wise with scale-shape normalization, and `F.scaled_mm`
  block-wise FP8 and MX through `harness/ops/block_scaled.py`, which owns their scale
  layouts and the one MX swizzle, shared with the probes); `harness/linear/matrix.py` builds
  the scheme x path matrix and the linear dispatch report.
- ``operands`` (with ``harness.linear.operands``, ``harness.linear.operand_designs``): The
  optional path capability `quantized_operands(layer, x, out_dtype) -> QuantizedOperands`
  (the activation and weight a path hands its kernel, read back into the harness's layout;
  `emulated`, `native`, the torchao adapter's paths and `vllm_fp8_linear` have it;
  `shows_operands(scheme, problem)`, read by `operands_shown`, lets a path skip problems
  where its kernel quantizes no activation); the four bit-exact operand checks against the
  reference quantizer and the loaded weight, under the path's declared conventions; designed
  inputs where a subnormal code or a tiny weight block alone decides outputs (built at test
  time, each checked to hold).
- ``bounds``: The one GEMM bound, `gemm_interval` (see ``compare`` in `harness.core`, which
  describes it with the tolerance policy), and its radius form `gemm_error`, which the MoE
  block's SiLU stage propagates.
- ``kernel``: `Kernel`, one description of a native kernel's contract (its operands, the
  activation scales it runs, its capability probe) with ``accepts`` written once; the
  harness's kernel modes and every adapter's kernels are `Kernel`s (or subclass it, adding
  how to call the kernel).
- ``case``: `Case`, the one type of a suite's case: its test id, record fields, finding case
  and golden entry built from the fields it declares (every case class of the linear, MoE,
  loading and model suites inherits it).
- ``execution``: `execution_of`, what a path runs on a simulated platform, from its
  ``runs_kernel_source`` declaration: GPU kernel source under the interpreter or CPU code
  (the record's ``execution`` field).
"""

from __future__ import annotations

from harness.paths.base import (
    KernelContract,
    LinearPath,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PathBase,
    Support,
)

__all__ = [
    "KernelContract",
    "LinearPath",
    "LinearPathBase",
    "LinearProblem",
    "Numerics",
    "OperandContract",
    "PathBase",
    "Support",
]
