"""The vLLM Triton paths' tables and the facts their docstrings state about vLLM.

Skips, counted and with the reason, where the vLLM adapter is not installed. The suites run
the kernels (``scripts/engine.py vllm-triton``: the linear suite on simulated gfx942 and
gfx950); these tests need no simulation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip(
    "qharness_vllm",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

import vllm.model_executor.layers.quantization.utils as quant_utils_pkg
from qharness_vllm import triton_linear, triton_platform

from harness.core.schemes import SCHEMES
from harness.linear.cases import LINEAR_SHAPES
from harness.linear.paths import get_path
from harness.paths.dispatch import dispatch_problems
from harness.platform.info import detect

PATHS = (
    triton_linear.VllmTritonScaledMMPath,
    triton_linear.VllmTritonScaledMMTailsPath,
    triton_linear.VllmTritonBlockFp8Path,
    triton_linear.VllmTritonBlockFp8TailsPath,
)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_dispatch_table_is_consistent(path: type) -> None:
    """One decision per registered scheme and arch; each kernel decision its contract takes."""
    problems = dispatch_problems(SCHEMES, path().kernels, path.table)
    assert not problems, "\n".join(problems)


def test_tables_send_each_arch_its_fp8_flavour() -> None:
    """gfx942 runs e4m3fnuz schemes only, gfx950 e4m3fn only (vLLM's fp8_dtype() there)."""
    for table, kernel in (
        (triton_linear.SCALED_MM_TABLE, triton_linear.SCALED_MM.name),
        (triton_linear.BLOCK_FP8_TABLE, triton_linear.BLOCK_FP8.name),
    ):
        for arch, flavour in (("gfx942", "e4m3fnuz"), ("gfx950", "e4m3fn")):
            runs = table[arch][kernel]
            assert runs, f"{kernel} runs nothing on {arch}"
            assert {SCHEMES[s].weight.format for s in runs} == {flavour}, (arch, sorted(runs))


def test_vllm_ships_no_tuned_block_config_for_the_suite_shapes() -> None:
    """So the default config is what vLLM picks for the suite's N and K on every device
    (w8a8_triton_block_scaled_mm looks configs up by N, K and device name)."""
    configs = Path(quant_utils_pkg.__file__).parent / "configs"
    assert configs.is_dir(), configs
    for _, n, k in LINEAR_SHAPES:
        found = sorted(p.name for p in configs.glob(f"N={n},K={k},*"))
        assert not found, found


def test_tuned_paths_cover_every_tile_of_vllms_tuned_files() -> None:
    """One `vllm_triton_block_fp8_tuned_*` path per distinct (BLOCK_SIZE_K, BLOCK_SIZE_N)
    in the installed tuned files for 128x128 blocks, read here independently of the
    adapter; tiles wider than the scale group declare the tile-spans-groups finding."""
    import json

    configs = Path(quant_utils_pkg.__file__).parent / "configs"
    tiles = set()
    for file in configs.iterdir():
        if file.name.endswith("dtype=fp8_w8a8,block_shape=[128,128].json"):
            for config in json.loads(file.read_text()).values():
                tiles.add((config["BLOCK_SIZE_K"], config["BLOCK_SIZE_N"]))
    assert tiles, f"no tuned block-FP8 files in {configs}"
    paths = [
        triton_linear.VllmTritonBlockFp8TunedPath(c) for c in triton_linear.tuned_block_configs()
    ]
    assert sorted(p.name for p in paths) == sorted(
        f"vllm_triton_block_fp8_tuned_k{k}n{n}" for k, n in tiles
    )
    for path in paths:
        wide = path.config["BLOCK_SIZE_K"] > 128
        declared = any("BLOCK_SIZE_K wider" in f.text for f in path.known_findings)
        assert declared == wide, path.name


@pytest.mark.skipif(
    triton_platform.simulated_arch() is not None, reason="this process runs a simulated platform"
)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_paths_skip_with_the_reason_on_a_plain_cpu(path: type) -> None:
    platform = detect()
    if platform.device != "cpu":
        pytest.skip("a GPU: the paths run natively")
    from harness.linear.cases import LinearCase

    case = LinearCase("fp8_per_block_fnuz", path.name, (8, 128, 256), False, "bf16")
    support = get_path(path.name).supports(SCHEMES[case.scheme], case.problem, platform)
    assert not support.ok
    assert "QHARNESS_SIMULATE" in support.reason


def test_simulated_arch_reads_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QHARNESS_SIMULATE", "triton-interpret:gfx950")
    assert triton_platform.simulated_arch() == "gfx950"
    monkeypatch.setenv("QHARNESS_SIMULATE", "")
    assert triton_platform.simulated_arch() is None
    assert os.environ["QHARNESS_SIMULATE"] == ""


def test_bf16_upcast_exact_widens_every_bf16_value() -> None:
    """Under the interpreter, `bf16_upcast_exact` makes bfloat16 -> float32 the exact
    widening for every bf16 value (the interpreter's own conversion garbles subnormals:
    scripts/vllm_triton/interpreter_bf16_subnormals.py) and counts the subnormals."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the replacement acts under Triton's interpreter only (TRITON_INTERPRET=1)")
    import torch
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[misc]
    def widen(src, dst, N: tl.constexpr):  # type: ignore[no-untyped-def]
        o = tl.arange(0, N)
        tl.store(dst + o, tl.load(src + o).to(tl.float32))

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    finite = every[torch.isfinite(every)]
    n = triton.next_power_of_2(finite.numel())
    src = torch.cat([finite, torch.zeros(n - finite.numel(), dtype=torch.bfloat16)])
    plain, exact = torch.empty(n), torch.empty(n)
    widen[(1,)](src, plain, N=n)
    with triton_platform.bf16_upcast_exact() as seen:
        widen[(1,)](src, exact, N=n)
    assert torch.equal(exact.view(torch.int32), src.float().view(torch.int32))
    subnormal = (finite != 0) & (finite.float().abs() < 2.0**-126)
    assert seen.count == int(subnormal.sum()) == 254  # 127 positive, 127 negative
    assert (plain[: finite.numel()][subnormal] != finite[subnormal].float()).all()
