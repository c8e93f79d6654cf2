"""The SGLang adapter's own checks: its torch routers compile from SGLang's installed
``topk.py`` and register; on a simulated arch SGLang's own ``is_fp8_fnuz()`` picks the FP8
flavour and bound the quantizers declare (e4m3fnuz / 224 on gfx942, e4m3fn / 448 on
gfx950). The numerics are checked by the suites (the sglang stage runs them).

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
    for name in ("sglang_biased_grouped_topk", "sglang_grouped_topk"):
        assert routes_itself(moe_paths()[name])


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
