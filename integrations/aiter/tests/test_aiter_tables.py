"""The aiter adapter's scheme tables agree with the registry and with each kernel's contract.

Skips, counted and with the reason, where the aiter adapter is not installed
(``python3 scripts/engine.py aiter``).
"""

from __future__ import annotations

import pytest

from harness.core.schemes import SCHEMES


def _linear():  # type: ignore[no-untyped-def]
    return pytest.importorskip(
        "qharness_aiter.linear",
        reason="aiter adapter not installed (python3 scripts/engine.py aiter)",
    )


def test_aiter_tables_have_no_problems() -> None:
    assert _linear().table_problems() == []


def test_aiter_fp8_rows_follow_the_arch_flavour() -> None:
    """gfx942 runs e4m3fnuz only, gfx950 e4m3fn only; MXFP4 only on gfx950 (scaled MFMA)."""
    linear = _linear()
    flavour = {"gfx942": "e4m3fnuz", "gfx950": "e4m3fn"}
    for kernel, gemm in linear.GEMMS.items():
        for arch, names in linear.KERNEL_SCHEMES[kernel].items():
            for name in names:
                fmt = SCHEMES[name].weight.format
                assert fmt == "e2m1" or fmt == flavour[arch], (kernel, arch, name)
                assert gemm.accepts(SCHEMES[name]).ok, (kernel, name)
    assert not linear.KERNEL_SCHEMES["gemm_afp4wfp4"]["gfx942"]


def test_aiter_tables_cover_every_scheme_the_kernels_accept() -> None:
    """A registered scheme a kernel's contract accepts in the arch's FP8 flavour is in its
    table: a new scheme cannot skip silently."""
    linear = _linear()
    flavour = {"gfx942": {"e4m3fnuz", "e2m1"}, "gfx950": {"e4m3fn", "e2m1"}}
    for kernel, gemm in linear.GEMMS.items():
        for arch, names in linear.KERNEL_SCHEMES[kernel].items():
            runnable = {
                n
                for n, s in SCHEMES.items()
                if gemm.accepts(s).ok
                and s.weight.format in flavour[arch]
                and (arch == "gfx950" or s.weight.format != "e2m1")
            }
            assert set(names) == runnable, (kernel, arch, sorted(runnable ^ set(names)))


def test_aiter_a8wfp4_takes_per_token_fp8_times_mxfp4_only() -> None:
    """gemm_a8wfp4's contract states each operand on its own: of the registered schemes it
    accepts only FP8 row-scaled activations x MXFP4 weights, not MX-FP8 activations."""
    linear = _linear()
    gemm = linear.GEMMS["gemm_a8wfp4"]
    assert {n for n, s in SCHEMES.items() if gemm.accepts(s).ok} == {"w_mxfp4_a_fp8_per_token"}
    why = gemm.accepts(SCHEMES["w_mxfp4_a_fp8"]).reason
    assert why == "activation scales are e8m0, the kernel takes fp32"
    assert "not quantized" in gemm.accepts(SCHEMES["w_mxfp4"]).reason


def test_aiter_a8wfp4_tail_pieces_are_whole_k_blocks() -> None:
    """The tail config's split-K pieces: cdiv(K, NUM_KSPLIT) rounded up to BLOCK_SIZE_K, so
    the pieces the kernel steps through by whole blocks never overlap."""
    linear = _linear()
    cfg = {"BLOCK_SIZE_K": 128, "NUM_KSPLIT": 2}
    for k, piece in ((128, 128), (256, 128), (320, 256), (4096, 2048)):
        got = linear.TAIL_DERIVED["gemm_a8wfp4"](k, cfg)
        assert got["SPLITK_BLOCK_SIZE"] == piece, k
        assert got["SPLITK_BLOCK_SIZE"] * cfg["NUM_KSPLIT"] >= k


def _moe():  # type: ignore[no-untyped-def]
    return pytest.importorskip(
        "qharness_aiter.moe",
        reason="aiter adapter not installed (python3 scripts/engine.py aiter)",
    )


def test_aiter_moe_table_has_no_problems_and_follows_the_arch_flavour() -> None:
    moe = _moe()
    assert moe.moe_table_problems() == []
    flavour = {"gfx942": "e4m3fnuz", "gfx950": "e4m3fn"}
    for arch, modes in moe.MODE_SCHEMES.items():
        for mode, names in modes.items():
            for name in names:
                assert SCHEMES[name].weight.format == flavour[arch], (arch, mode, name)


def test_aiter_moe_table_covers_every_scheme_the_modes_accept() -> None:
    """Every registered scheme a fused_moe mode accepts in the arch's FP8 flavour is in
    that mode's row, so a new scheme cannot skip silently."""
    moe = _moe()
    flavour = {"gfx942": "e4m3fnuz", "gfx950": "e4m3fn"}
    for arch, modes in moe.MODE_SCHEMES.items():
        for mode, names in modes.items():
            runnable = {
                n
                for n, s in SCHEMES.items()
                if moe.MODES[mode].accepts(s).ok and s.weight.format == flavour[arch]
            }
            assert set(names) == runnable, (arch, mode, sorted(runnable ^ set(names)))


def _moe_mxfp4():  # type: ignore[no-untyped-def]
    return pytest.importorskip(
        "qharness_aiter.moe_mxfp4",
        reason="aiter adapter not installed (python3 scripts/engine.py aiter)",
    )


def test_aiter_moe_mxfp4_table_runs_every_accepted_scheme_on_gfx950_only() -> None:
    """Every registered scheme the MXFP4 mode accepts is in the gfx950 row (a new one
    cannot skip silently); gfx942 runs none (no FP4 arithmetic, no MXFP4 MoE configs)."""
    moe = _moe_mxfp4()
    assert moe.moe_mxfp4_table_problems() == []
    for mode, contract in moe.MODES.items():
        runnable = {n for n, s in SCHEMES.items() if contract.accepts(s).ok}
        assert set(moe.MODE_SCHEMES["gfx950"][mode]) == runnable, sorted(runnable)
        assert not moe.MODE_SCHEMES["gfx942"][mode]
    assert "w_mxfp4_a_mxfp4" in moe.MODE_SCHEMES["gfx950"][moe.A_MXFP4]


def _fused_quant():  # type: ignore[no-untyped-def]
    return pytest.importorskip(
        "qharness_aiter.fused_quant",
        reason="aiter adapter not installed (python3 scripts/engine.py aiter)",
    )


def test_aiter_fused_fp8_quant_groups() -> None:
    """1x128 groups on any K; whole rows only where K is a power of two (the kernel
    reshapes its next_power_of_2(K) block into groups)."""
    fq = _fused_quant()
    block = SCHEMES["fp8_per_block"].activation
    row = SCHEMES["fp8_per_channel"].activation
    assert fq.fp8_group_size(block, 176) == 128
    assert fq.fp8_group_size(block, 16) == 128
    assert fq.fp8_group_size(row, 256) == 256
    assert fq.fp8_group_size(row, 176) is None
    assert fq.fp8_group_size(SCHEMES["fp8_per_tensor"].weight, 256) is None
