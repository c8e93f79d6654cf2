"""The seed bug, on vLLM's own code: its two FP8 post-load steps in both orders on e4m3fnuz.

vLLM's FP8 method runs ``normalize_e4m3fn_to_e4m3fnuz`` before ``requantize_with_max_scale``
on fnuz platforms. Run the other way round, requantization quantizes into the platform's
e4m3fnuz range (bound 224) with scales that still belong to e4m3fn values (bound 448), so
every code above 224 saturates. The loader suite's shard check must accept vLLM's order and
reject the other on every per-tensor case whose shards are requantized. Both orders are the
adapter's loaders around vLLM's unmodified functions (integrations/vllm); the quant kernel
and the gfx942 platform switches are the adapter's (qharness_vllm.platform). Skips, counted
and with the reason, where the vLLM adapter is not installed.
"""

from __future__ import annotations

from typing import Any

import pytest

loader_module = pytest.importorskip(
    "qharness_vllm.loader",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

from harness.core.schemes import SCHEMES  # noqa: E402
from harness.loading.cases import CASES, checkpoint_from_golden, golden_entry  # noqa: E402
from harness.loading.invariants import shard_violations  # noqa: E402

FNUZ = "e4m3fnuz"
PER_TENSOR_FN = [
    name
    for name, s in SCHEMES.items()
    if s.family == "fp8" and s.weight.format == "e4m3fn" and s.weight.granularity == "per_tensor"
]


def _violations(loader: Any, golden_store: Any, scheme: str, case: str) -> list[str]:
    ckpt = checkpoint_from_golden(golden_store.load(golden_entry(scheme, case)), scheme, case)
    return shard_violations(ckpt, loader.load(ckpt, FNUZ))


@pytest.mark.parametrize("scheme", PER_TENSOR_FN)
@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_vllm_order_normalize_then_requantize_passes(
    scheme: str, case: str, golden_store: Any
) -> None:
    problems = _violations(loader_module.vllm_fp8_loader(), golden_store, scheme, case)
    assert not problems, "; ".join(problems)


@pytest.mark.parametrize("scheme", PER_TENSOR_FN)
@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_requantize_first_is_rejected(scheme: str, case: str, golden_store: Any) -> None:
    """vLLM requantizes every per-tensor layer whose last scale slot is loaded, a single
    shard included, so in this order every case quantizes into the 224 bound and the shard
    check must fail on the saturated codes."""
    problems = _violations(
        loader_module.vllm_fp8_requantize_first_loader(), golden_store, scheme, case
    )
    assert problems, f"{scheme}/{case}: requantize-first on fnuz was not caught"
    assert all("differ from the checkpoint" in p for p in problems), problems
