"""The SGLang adapter's own checks: its torch routers compile from SGLang's installed
``topk.py`` and register; on a simulated arch SGLang's own ``is_fp8_fnuz()`` picks the FP8
flavour and bound the quantizers declare (e4m3fnuz / 224 on gfx942, e4m3fn / 448 on
gfx950), and SGLang's own block-GEMM selection and config lookup pick what the linear paths
say they run. The numerics are checked by the suites (the sglang stage runs them).

Skips, counted and with the reason, where the adapter is not installed or no arch is
simulated.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip(
    "qharness_sglang",
    reason="sglang adapter not installed (scripts/engine.py sglang installs it in its own venv)",
)

from qharness_sglang.quantizer import SGLANG_FP8
from qharness_sglang.router import sglang_torch_routers

from harness import detect_platform
from harness.moe.paths import moe_paths, routes_itself

FP8_DTYPES = {"e4m3fnuz": torch.float8_e4m3fnuz, "e4m3fn": torch.float8_e4m3fn}


def test_sglang_routers_compile_and_register() -> None:
    assert set(sglang_torch_routers()) == {"grouped_topk_gpu", "biased_grouped_topk_impl"}
    for name in ("sglang_biased_grouped_topk", "sglang_grouped_topk", "sglang_select_experts"):
        assert routes_itself(moe_paths()[name])


def test_sglang_select_experts_dispatches_to_its_torch_routers() -> None:
    """``select_experts`` as compiled for ROCm without aiter: SGLang's own dispatch names
    bind to its torch routers, its ``TopKConfig`` defaults are SGLang's, and a GPU kernel
    it could reach refuses rather than stands in."""
    from qharness_sglang.select_experts import sglang_select_experts

    mod = sglang_select_experts("gfx942")
    assert mod["grouped_topk"] is mod["grouped_topk_gpu"]
    assert mod["biased_grouped_topk"] is mod["biased_grouped_topk_gpu"]
    assert mod["fused_topk_native"] is mod["fused_topk_torch_native"]
    config = mod["TopKConfig"](top_k=2)
    assert (config.torch_native, config.apply_routed_scaling_factor_on_output) == (False, False)
    assert config.num_shared_topk_slots == 0
    logits = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    with pytest.raises(RuntimeError, match="fused_topk, a GPU kernel"):
        mod["select_experts"](logits, logits, config)  # torch_native False: topk_softmax


def test_sglang_fp8_flavour_is_sglangs_own_choice() -> None:
    platform = detect_platform()
    if platform.simulated != "triton-interpret" or platform.arch not in SGLANG_FP8:
        pytest.skip("needs a simulated gfx942/gfx950 (QHARNESS_SIMULATE, TRITON_INTERPRET=1)")
    from qharness_sglang.loader import sglang_fp8_kernel

    mod = sglang_fp8_kernel(platform)
    fmt, bound = SGLANG_FP8[platform.arch]
    assert mod.fp8_dtype == FP8_DTYPES[fmt]
    assert mod.fp8_max == (bound if bound is not None else torch.finfo(mod.fp8_dtype).max)
    # On ROCm, per_token_group_quant_fp8 is the Triton path the quantizers run.
    assert mod.per_token_group_quant_fp8 is mod._per_token_group_quant_8bit_raw


def _simulated_platform():  # type: ignore[no-untyped-def]
    platform = detect_platform()
    if platform.simulated != "triton-interpret" or platform.arch not in SGLANG_FP8:
        pytest.skip("needs a simulated gfx942/gfx950 (QHARNESS_SIMULATE, TRITON_INTERPRET=1)")
    return platform


def test_sglang_block_gemm_kernel_is_sglangs_rocm_choice() -> None:
    """On ROCm SGLang's kernel selection runs ``_w8a8_block_fp8_matmul`` (its unrolled-x4
    test returns None), whatever the grid, so that is the kernel the paths run."""
    from qharness_sglang.loader import sglang_gemm_kernel

    gemm = sglang_gemm_kernel(_simulated_platform())
    for m, n in ((1, 16), (37, 144), (4096, 7168)):
        meta = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128}
        chosen = gemm.select_w8a8_block_fp8_matmul_kernel(m, n, meta)
        assert chosen is gemm._w8a8_block_fp8_matmul


def test_sglang_ships_no_tuned_block_config_for_the_suite_shapes() -> None:
    """So SGLang's default config is what sglang_triton_block_fp8 runs for the suite's N and
    K (SGLang looks configs up by N, K and the device name)."""
    from qharness_sglang.linear import TAIL_TILE
    from qharness_sglang.loader import ROCM_DEVICE_NAMES, sglang_gemm_kernel

    from harness.linear.cases import LINEAR_SHAPES

    platform = _simulated_platform()
    gemm = sglang_gemm_kernel(platform)
    assert gemm.get_device_name() == ROCM_DEVICE_NAMES[platform.arch][0]
    for _, n, k in LINEAR_SHAPES:
        assert gemm.get_w8a8_block_fp8_configs(n, k, 128, 128) is None, (n, k)
    # the tail tile is one SGLang's ROCm config loader keeps as it is (BLOCK_SIZE_K >= 128)
    assert TAIL_TILE[2] >= 128
