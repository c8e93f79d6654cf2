"""vLLM's compressed-tensors NVFP4 and MX loaders on fused layers (qharness_vllm
.nvfp4_fused_loading, .mx_fused_loading).

Every fused NVFP4 design of the loading suite (harness.loading.fused_nvfp4) is loaded
through vLLM's own layer, weight loaders and ``process_weights_after_loading``, and held to
the same checks as the harness's loader: one global for the layer, every shard exactly the
checkpoint's (within the declared float32 rounding of the global). Where the shards'
globals differ, the known finding `FUSED_GLOBAL_MAX` is the case's xfail only if the loaded
layer is exactly what the finding's rule gives; anything else fails. MX (MXFP8, MXFP4):
every shard's codes and E8M0 scales land in its own rows through vLLM's weight loaders.
"""

from __future__ import annotations

import pytest

fused = pytest.importorskip(
    "qharness_vllm.nvfp4_fused_loading",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

import torch  # noqa: E402

from harness.loading.checks import fused_nvfp4_checks  # noqa: E402
from harness.loading.fused_nvfp4 import (  # noqa: E402
    FUSED_NVFP4_DESIGNS,
    fused_nvfp4_checkpoint,
)
from harness.loading.transforms import LoadError  # noqa: E402
from harness.paths.findings import KnownFinding  # noqa: E402

KNOWN_FINDINGS = fused.KNOWN_FINDINGS
finding_case = fused.finding_case
finding_rule_violations = fused.finding_rule_violations
load_fused_nvfp4 = fused.load_fused_nvfp4


def _finding(design: str) -> KnownFinding | None:
    return next((f for f in KNOWN_FINDINGS if f.matches(finding_case(design))), None)


@pytest.mark.parametrize("design", [d.name for d in FUSED_NVFP4_DESIGNS])
def test_vllm_fused_nvfp4_shards_share_global(design: str) -> None:
    ckpt = fused_nvfp4_checkpoint(design)
    try:
        loaded = load_fused_nvfp4(ckpt)
    except LoadError:
        assert not ckpt.globals_equal, "vLLM refused shards that share their global"
        return
    failed = [r for r in fused_nvfp4_checks(ckpt, loaded) if r.failed]
    if not failed:
        return
    finding = _finding(design)
    messages = "; ".join(f"{r.name}: {r.message}" for r in failed)
    if finding is None:
        pytest.fail(messages, pytrace=False)
    off_rule = finding_rule_violations(ckpt, loaded)
    assert off_rule == [], f"not the known finding's rule: {off_rule} ({messages})"
    pytest.xfail(f"{finding.text}: {messages}")


def test_the_finding_rule_is_not_the_correct_load() -> None:
    """The rule the xfail is scoped to differs from a correct load of every design it
    covers (else an xfail could hide a pass), and matches vLLM's load there."""
    for d in FUSED_NVFP4_DESIGNS:
        if _finding(d.name) is None:
            continue
        ckpt = fused_nvfp4_checkpoint(d.name)
        assert not ckpt.globals_equal
        loaded = load_fused_nvfp4(ckpt)
        assert finding_rule_violations(ckpt, loaded) == []
        assert [r.name for r in fused_nvfp4_checks(ckpt, loaded) if r.failed]


mx = pytest.importorskip("qharness_vllm.mx_fused_loading")

# q/k/v widths no power of two, and gate/up: every shard boundary a row of its own
MX_SHARDS = {
    "qkv": (("q_proj", 96), ("k_proj", 48), ("v_proj", 48)),
    "gate_up": (("gate_proj", 80), ("up_proj", 80)),
}


@pytest.mark.parametrize("layout", list(MX_SHARDS))
@pytest.mark.parametrize("scheme", list(mx.MX_SCHEMES))
def test_vllm_mx_fused_shards_keep_their_scales(scheme: str, layout: str) -> None:
    """Every shard's codes and E8M0 scales in its own rows after vLLM's weight loaders,
    bit for bit (each shard's scales differ from its neighbours': peaks 2^-3..2^5 apart)."""
    from harness.core.inputs import scaled_normal
    from harness.core.quantize import quantize
    from harness.core.schemes import get_scheme

    spec = get_scheme(scheme).weight
    names = tuple(n for n, _ in MX_SHARDS[layout])
    codes, scales = [], []
    for i, (name, rows) in enumerate(MX_SHARDS[layout]):
        w = scaled_normal(f"vllm_mx_fused/{scheme}/{layout}/{name}", rows, 256, spec)
        q = quantize(w * 2.0 ** (4 * i - 3), spec)
        codes.append(q.codes)
        scales.append(spec.scale_fmt.store(q.scale.float().contiguous()).view(torch.uint8))
    got_codes, got_scales = mx.load_mx_shards(scheme, names, codes, scales)
    packed = got_codes.shape[1] != codes[0].shape[1]
    start = 0
    for name, c, s in zip(names, codes, scales, strict=True):
        rows = slice(start, start + c.shape[0])
        start += c.shape[0]
        want_codes = pack_fp4_codes(c) if packed else c
        assert torch.equal(got_scales[rows], s), f"{name}: E8M0 scales not the shard's own"
        assert torch.equal(got_codes[rows], want_codes), f"{name}: codes not the shard's own"
    assert start == got_codes.shape[0]


def pack_fp4_codes(codes: torch.Tensor) -> torch.Tensor:
    from harness import pack_fp4

    return pack_fp4(codes)
