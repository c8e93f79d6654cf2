"""The vLLM fused-MoE Triton paths: the align stand-in against vLLM's documented contract,
the dispatch table against vLLM's own backend predicates, and the launcher facts the
paths' docstrings state.

Skips, counted and with the reason, where the vLLM adapter is not installed. The suites run
the kernel (``scripts/engine.py vllm-triton``: the MoE suite on simulated gfx942, gfx950
and sm_90); these tests need no interpreter.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

pytest.importorskip(
    "qharness_vllm",
    reason="vLLM adapter not installed (python scripts/engine.py vllm installs it in its own venv)",
)

import torch
import vllm.model_executor.layers.fused_moe.fused_moe as fused_moe_mod
from qharness_vllm import moe_align, triton_moe, triton_platform
from vllm.model_executor.layers.fused_moe.moe_align_block_size import moe_align_block_size

from harness.core.schemes import SCHEMES
from harness.moe.cases import EXPERT_CONFIGS, MOE_HIDDEN, MOE_INTERMEDIATE, TOKEN_COUNTS
from harness.moe.dispatch import MOE_SCHEMES
from harness.paths.dispatch import EMULATE, dispatch_problems

PATHS = (triton_moe.VllmTritonFusedMoEPath, triton_moe.VllmTritonFusedMoESmallBlocks)


# ------------------------------------------------------------------ the align op
def _align(ids: torch.Tensor, block: int, experts: int) -> tuple[torch.Tensor, ...]:
    """vLLM's Python wrapper (its allocation) over the compiled op or the stand-in."""
    with moe_align.compiled_or_stand_in():
        return moe_align_block_size(ids.to(torch.int32), block, experts)


def test_align_matches_the_docstring_example() -> None:
    """vLLM's worked example (moe_align_block_size's docstring). The docstring numbers the
    experts 1..4 with num_experts = 4; with the ids less one, the same sorted order."""
    ids = torch.tensor([[2, 3, 4], [1, 2, 4], [1, 3, 4], [1, 2, 3]]) - 1
    sorted_ids, expert_ids, post_pad = _align(ids, 4, 4)
    expected = [3, 6, 9, 12, 0, 4, 10, 12, 1, 7, 11, 12, 2, 5, 8, 12]
    assert int(post_pad) == 16
    assert sorted_ids[:16].tolist() == expected
    assert expert_ids[:4].tolist() == [0, 1, 2, 3]
    assert sorted_ids.numel() == 12 + 4 * 3  # max_num_tokens_padded, vLLM's allocation
    assert sorted_ids[16:].eq(12).all()  # padding id = numel past the padded total


def _brute_force(flat: list[int], block: int, experts: int) -> tuple[list[list[int]], list[int]]:
    """Per M block: its pair ids (padding = numel), and its expert, by plain loops."""
    numel = len(flat)
    blocks: list[list[int]] = []
    owners: list[int] = []
    for e in range(experts):
        pairs = [i for i, x in enumerate(flat) if x == e]
        for start in range(0, len(pairs), block):
            chunk = pairs[start : start + block]
            blocks.append(chunk + [numel] * (block - len(chunk)))
            owners.append(e)
    return blocks, owners


@pytest.mark.parametrize(
    ("tokens", "top_k", "experts", "block"),
    [(1, 2, 8, 16), (7, 2, 8, 16), (7, 4, 16, 4), (64, 4, 16, 32), (13, 3, 5, 1), (64, 2, 8, 64)],
)
def test_align_matches_a_brute_force_construction(
    tokens: int, top_k: int, experts: int, block: int
) -> None:
    """Seeded routings, some experts empty: each block holds the pairs the brute force puts
    there (as a set: the GPU op's order within an expert is free), padded with numel."""
    gen = torch.Generator().manual_seed(tokens * 1000 + experts * 10 + block)
    used = max(1, experts - 2)  # leave the last experts without pairs
    ids = torch.stack([torch.randperm(used, generator=gen)[:top_k] for _ in range(tokens)])
    sorted_ids, expert_ids, post_pad = _align(ids, block, experts)
    blocks, owners = _brute_force(ids.flatten().tolist(), block, experts)
    assert int(post_pad) == len(blocks) * block
    got = sorted_ids[: int(post_pad)].reshape(-1, block).tolist()
    assert [sorted(b) for b in got] == [sorted(b) for b in blocks]
    assert expert_ids[: len(owners)].tolist() == owners


def test_align_stand_in_is_installed_only_for_the_call() -> None:
    """The stand-in replaces vLLM's op binding only inside the context, and only where the
    compiled op is missing."""
    from vllm import _custom_ops as ops

    before = ops.moe_align_block_size
    with moe_align.compiled_or_stand_in() as stood:
        assert stood == (not moe_align.compiled_op_present())
        inside = ops.moe_align_block_size
    assert ops.moe_align_block_size is before
    assert (inside is moe_align.align_block_size) == stood


def test_align_stand_in_refuses_what_it_does_not_implement() -> None:
    buffers = (torch.empty(64, dtype=torch.int32), torch.empty(4, dtype=torch.int32))
    post = torch.empty(1, dtype=torch.int32)
    ids = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(NotImplementedError):
        moe_align.align_block_size(ids, 4, 16, *buffers, post, expert_map=torch.arange(4))
    with pytest.raises(ValueError, match="outside"):
        moe_align.align_block_size(ids + 4, 4, 16, *buffers, post)


@pytest.mark.parametrize(("tokens", "naive"), [(1, True), (7, False), (64, False)])
@pytest.mark.parametrize(("experts", "top_k"), EXPERT_CONFIGS)
def test_suite_shapes_take_both_of_vllms_assignment_routes(
    tokens: int, naive: bool, experts: int, top_k: int
) -> None:
    """t1 takes vLLM's naive one-pair-per-block route (tokens * top_k * 4 <= experts at
    both suite configs), t7 and t64 the aligned one: both are exercised by the suite."""
    assert tokens in TOKEN_COUNTS
    ids = torch.zeros(tokens, top_k, dtype=torch.int32)
    ids[:] = torch.arange(top_k, dtype=torch.int32)
    with moe_align.compiled_or_stand_in():
        sorted_ids, expert_ids, post = fused_moe_mod._prepare_expert_assignment(
            ids, {"BLOCK_SIZE_M": 16}, tokens, top_k, experts, None
        )
    assert (sorted_ids is None) == naive
    if naive:
        assert expert_ids.tolist() == ids.flatten().tolist()
        assert int(post) == ids.numel() * 16


# --------------------------------------------------------------------- the table
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_dispatch_table_is_consistent(path: type) -> None:
    """One decision per MoE scheme and arch; each mode decision its contract takes."""
    problems = dispatch_problems(MOE_SCHEMES, path().kernels, path().table)
    assert not problems, "\n".join(problems)


def test_table_runs_the_schemes_vllm_sends_to_the_kernel() -> None:
    """The explicit schemes per arch and mode: gfx942 e4m3fnuz, gfx950 e4m3fn, all three
    modes; sm_90 the 128x128 block scheme only."""
    t = triton_moe.moe_table()
    runs = {arch: {m: sorted(s) for m, s in row.items() if m != EMULATE} for arch, row in t.items()}
    assert runs == {
        "gfx942": {
            triton_moe.PER_TENSOR: ["fp8_per_tensor_fnuz", "fp8_per_tensor_fnuz_clamp224"],
            triton_moe.PER_CHANNEL: ["fp8_per_channel_fnuz", "fp8_per_channel_fnuz_clamp224"],
            triton_moe.PER_BLOCK: ["fp8_per_block_fnuz"],
        },
        "gfx950": {
            triton_moe.PER_TENSOR: ["fp8_per_tensor"],
            triton_moe.PER_CHANNEL: ["fp8_per_channel"],
            triton_moe.PER_BLOCK: ["fp8_per_block"],
        },
        "sm_90": {triton_moe.PER_BLOCK: ["fp8_per_block"]},
    }


def test_every_fp8_scheme_of_an_arch_runs_or_says_what_vllm_runs_instead() -> None:
    """An FP8 (non-MX) scheme of the arch's flavour that this kernel does not run has a
    reason naming vLLM's choice; no reason is given for a scheme the table runs."""
    t = triton_moe.moe_table()
    for arch, row in t.items():
        flavour = "e4m3fnuz" if arch == "gfx942" else "e4m3fn"
        fp8 = {
            n
            for n, s in MOE_SCHEMES.items()
            if s.weight.format == flavour and s.weight.scale_fmt.name == "fp32"
        }
        run = frozenset().union(*(s for m, s in row.items() if m != EMULATE))
        reasons = triton_moe.NOT_SELECTED.get(arch, {})
        assert not (run & set(reasons)), (arch, sorted(run & set(reasons)))
        assert fp8 - run == set(reasons), (arch, sorted(fp8 - run), sorted(reasons))


# vLLM's (weight, activation) quant keys of each FP8 MoE scheme's kind, as compressed-
# tensors' FP8 MoE method derives them (quant_utils names)
_KEYS = {
    "fp8_per_tensor": ("kFp8StaticTensorSym", "kFp8StaticTensorSym"),
    "fp8_per_channel": ("kFp8StaticChannelSym", "kFp8DynamicTokenSym"),
    "fp8_per_block": ("kFp8Static128BlockSym", "kFp8Dynamic128Sym"),
    "fp8_w_per_channel_a_static": ("kFp8StaticChannelSym", "kFp8StaticTensorSym"),
}


@pytest.mark.parametrize("arch", sorted(triton_platform.ARCHS))
@pytest.mark.parametrize("kind", sorted(_KEYS))
def test_tritonexperts_keys_agree_with_the_table(arch: str, kind: str) -> None:
    """vLLM's TritonExperts takes the keys of exactly the kinds the table runs on ROCm
    (where it is the backend vLLM selects by default), on the simulated device."""
    from vllm.model_executor.layers.fused_moe.experts.triton_moe import TritonExperts
    from vllm.model_executor.layers.quantization.utils import quant_utils

    weight_key, act_key = (getattr(quant_utils, k) for k in _KEYS[kind])
    with triton_platform.simulated_device(arch):
        assert TritonExperts._supports_current_device()
        takes = TritonExperts._supports_quant_scheme(weight_key, act_key)
    assert takes == (kind != "fp8_w_per_channel_a_static")
    if triton_platform.ARCHS[arch].vendor == "rocm":
        flavoured = kind + ("_fnuz" if arch == "gfx942" else "")
        runs = triton_moe.moe_table()[arch].get(EMULATE, frozenset())
        assert (flavoured not in runs) == takes, (arch, flavoured)


def _first_backend(wk: object, ak: object) -> tuple[list[str], str | None]:
    """select_fp8_moe_backend's priority order here, and the first backend whose kernel
    classes take this device and key (the two predicates only: the full config check needs
    a model's FusedMoEConfig). Predicates that need a compiled op or a package this CPU build
    lacks (vLLM CUTLASS, flashinfer) answer False here, as an exception."""
    from types import SimpleNamespace

    from vllm.model_executor.layers.fused_moe.oracle import fp8 as oracle

    parallel = SimpleNamespace(use_deepep_v2_kernels=False, ep_size=1)  # one GPU, no EP
    order = oracle._get_priority_backends(SimpleNamespace(moe_parallel_config=parallel), wk, ak)
    for backend in order:
        try:
            classes = oracle.backend_to_kernel_cls(backend)
        except Exception:  # a backend whose module does not import on this build
            continue
        for cls in classes:
            try:
                ok = cls._supports_current_device() and cls._supports_quant_scheme(wk, ak)
            except Exception:
                ok = False
            if ok:
                return [b.value for b in order], backend.value
    return [b.value for b in order], None


@pytest.mark.parametrize("arch", sorted(triton_platform.ARCHS))
@pytest.mark.parametrize("kind", ["fp8_per_tensor", "fp8_per_channel", "fp8_per_block"])
def test_vllms_backend_order_agrees_with_the_table(arch: str, kind: str) -> None:
    """On the simulated ROCm archs TRITON is the first FP8 MoE backend that takes every
    kind the table runs (AITER off by default, the others CUDA-only); on sm_90 TRITON is
    moved to the front for blocks, and for per-tensor and per-channel FlashInfer CUTLASS and
    vLLM CUTLASS come before it and take the key (`NOT_SELECTED`'s reasons; their device
    predicates need flashinfer / compiled CUTLASS, absent here)."""
    from vllm.model_executor.layers.fused_moe.experts.cutlass_moe import CutlassExpertsFp8
    from vllm.model_executor.layers.fused_moe.experts.flashinfer_cutlass_moe import (
        FlashInferExperts,
    )
    from vllm.model_executor.layers.quantization.utils import quant_utils

    wk, ak = (getattr(quant_utils, k) for k in _KEYS[kind])
    with triton_platform.simulated_device(arch):
        order, first = _first_backend(wk, ak)
        flashinfer_takes = FlashInferExperts._supports_quant_scheme(wk, ak)
    cutlass_takes = CutlassExpertsFp8._supports_quant_scheme(wk, ak)
    if triton_platform.ARCHS[arch].vendor == "rocm":
        assert first == "TRITON", (order, first)
    elif kind == "fp8_per_block":
        assert order[0] == "TRITON", order
    else:
        assert order.index("VLLM_CUTLASS") < order.index("TRITON"), order
        assert order.index("FLASHINFER_CUTLASS") < order.index("TRITON"), order
        assert cutlass_takes
        assert flashinfer_takes == (kind == "fp8_per_tensor")


# ------------------------------------------------------------------ launcher facts
def test_vllm_ships_no_tuned_moe_config_for_the_suite_shapes() -> None:
    """So try_get_optimal_moe_config falls back to get_default_config on every simulated
    device (files are named by E, N = intermediate, device)."""
    configs = Path(fused_moe_mod.__file__).parent / "configs"
    assert configs.is_dir(), configs
    for experts, _ in EXPERT_CONFIGS:
        found = sorted(p.name for p in configs.glob(f"E={experts},N={MOE_INTERMEDIATE},*"))
        assert not found, found


def _default(arch: str, tokens: int, block_shape: list[int] | None) -> dict[str, int]:
    with triton_platform.simulated_platform(arch), triton_platform.simulated_device(arch):
        return dict(
            fused_moe_mod.try_get_optimal_moe_config(
                (16, 2 * MOE_INTERMEDIATE, MOE_HIDDEN),
                (16, MOE_HIDDEN, MOE_INTERMEDIATE),
                4,
                triton_moe.CONFIG_DTYPE,
                tokens,
                block_shape=block_shape,
            )
        )


def _tile(config: dict[str, int]) -> tuple[int, int, int]:
    return (config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"], config["BLOCK_SIZE_K"])


@pytest.mark.parametrize("tokens", TOKEN_COUNTS)
def test_default_configs_are_the_ones_the_module_doc_states(tokens: int) -> None:
    """Per tensor / per channel 16 or 32 x 64 x 128 everywhere; blocks 16 x 128 x 128 on
    ROCm, 16 x 64 x 128 (t <= 8) or 16 x 128 x 128 on CUDA."""
    block_m = 16 if tokens <= 32 else 32
    for arch in triton_platform.ARCHS:
        assert _tile(_default(arch, tokens, None)) == (block_m, 64, 128), arch
    for arch in ("gfx942", "gfx950"):
        assert _tile(_default(arch, tokens, [128, 128])) == (16, 128, 128), arch
    cuda_n = 64 if tokens <= 8 else 128
    assert _tile(_default("sm_90", tokens, [128, 128])) == (16, cuda_n, 128)


@pytest.mark.parametrize("tokens", TOKEN_COUNTS)
def test_swap_ab_runs_on_sm_90_only(tokens: int) -> None:
    """The launcher's SWAP_AB branch (capability 9.0, BLOCK_M < 64 <= BLOCK_N) is taken
    under vLLM's block config on the simulated sm_90 and nowhere on ROCm; the small-block
    config (BLOCK_N 16) takes the plain branch everywhere."""
    from vllm.model_executor.layers.fused_moe.utils import enable_swap_ab

    for arch in triton_platform.ARCHS:
        config = _default(arch, tokens, [128, 128])
        with triton_platform.simulated_device(arch):
            swap = enable_swap_ab(config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"])
            small = enable_swap_ab(16, triton_moe.SMALL_BLOCKS["BLOCK_SIZE_N"])
        assert swap == (arch == "sm_90"), arch
        assert not small


def test_simulated_device_restores_the_cpu_platform() -> None:
    from vllm.platforms import current_platform

    before = (current_platform.is_rocm(), current_platform.is_cuda())
    for arch, sim in triton_platform.ARCHS.items():
        with triton_platform.simulated_device(arch):
            assert current_platform.is_rocm() == (sim.vendor == "rocm")
            assert tuple(current_platform.get_device_capability()) == sim.capability
            assert current_platform.is_device_capability(90) == (arch == "sm_90")
    assert (current_platform.is_rocm(), current_platform.is_cuda()) == before


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_paths_skip_with_the_reason_on_a_plain_cpu(path: type) -> None:
    """Without the simulated platform the paths say how to get one."""
    if triton_platform.simulated_arch() is not None:
        pytest.skip("this process runs a simulated platform")
    from harness.moe.paths import MoEProblem
    from harness.platform.info import detect

    platform = detect()
    if platform.device != "cpu":
        pytest.skip("a GPU: the paths run natively")
    problem = MoEProblem(7, 8, 2, MOE_HIDDEN, MOE_INTERMEDIATE)
    support = path().supports(SCHEMES["fp8_per_block"], problem, platform)
    assert not support.ok
    assert "QHARNESS_SIMULATE" in support.reason


def test_small_blocks_expose_tails_at_the_suite_shapes() -> None:
    """16x16x16 at H = I = 32: two K steps, w13's N = 64 in four N blocks; vLLM's config
    (BLOCK_K 128, BLOCK_N 64): a masked K tail and the down GEMM's partial N block."""
    small = triton_moe.SMALL_BLOCKS
    assert MOE_HIDDEN // small["BLOCK_SIZE_K"] == 2
    assert 2 * MOE_INTERMEDIATE // small["BLOCK_SIZE_N"] == 4
    for arch, tokens in itertools.product(triton_platform.ARCHS, TOKEN_COUNTS):
        tile = _tile(_default(arch, tokens, None))
        assert tile[2] > MOE_HIDDEN, (arch, tile)  # one masked K block
        assert MOE_HIDDEN % tile[1] != 0, (arch, tile)  # the down GEMM's partial N block
