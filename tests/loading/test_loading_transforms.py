"""Unit tests of the loading transforms and invariant helpers, on hand-made states."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.core.formats import decode, encode
from harness.core.schemes import SCHEMES, get_scheme
from harness.loading.cases import CASES, FLAVOURS, build_case_checkpoint
from harness.loading.checks import check_bias_applied_once
from harness.loading.invariants import (
    AMBIGUOUS,
    bias_application_counts,
    check_loader,
    one_ulp_violations,
)
from harness.loading.loaders import loaders
from harness.loading.transforms import (
    SCALE_SLOT_SENTINEL,
    LoadError,
    LoadState,
    merge_input_scales,
    normalize_e4m3fn_to_e4m3fnuz,
    normalize_e4m3fnuz_to_e4m3fn,
    requantize_with_max_scale,
    scales_to_tile_grid,
)
from harness.ops.block_scaled import swizzle_32_4_4, unswizzle_32_4_4
from harness.paths.dispatch import foreign_fp8_flavour
from harness.platform.info import PlatformInfo


def _state(
    codes: torch.Tensor, scales: list[float], widths: tuple[int, ...], target: str = "e4m3fnuz"
) -> LoadState:
    return LoadState(
        scheme=get_scheme("fp8_per_tensor"),
        codes=codes,
        weight_scale=torch.tensor(scales, dtype=torch.float32),
        input_scale=torch.tensor(scales, dtype=torch.float32),
        bias=None,
        widths=widths,
        target_format=target,
    )


def _all_codes(rows: int) -> torch.Tensor:
    """Every finite e4m3fn code (0x7F/0xFF are NaN), repeated to ``rows`` x 8."""
    codes = torch.tensor([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=torch.uint8)
    return codes.repeat(rows * 8 // codes.numel() + 1)[: rows * 8].reshape(rows, 8)


def _values(state: LoadState) -> torch.Tensor:
    slots = state.weight_scale.reshape(-1)
    starts = state.offsets
    parts = [
        decode(state.codes[starts[i] : starts[i + 1]], state.scheme.weight.format) * slots[i]
        for i in range(len(state.widths))
    ]
    return torch.cat(parts)


def test_normalize_keeps_every_value_and_zeroes_negative_zero() -> None:
    codes = _all_codes(32)
    assert bool((codes == 0x80).any())
    state = _state(codes, [0.375, 3.0e-3], (16, 16))
    out = normalize_e4m3fn_to_e4m3fnuz(state)
    assert not bool((out.codes == 0x80).any()), "0x80 is NaN in e4m3fnuz"
    assert out.scheme.weight.format == "e4m3fnuz"
    assert torch.equal(out.weight_scale, state.weight_scale * 2)
    assert torch.equal(out.input_scale, state.input_scale * 2)  # type: ignore[arg-type]
    assert torch.equal(_values(out), _values(state))  # exact: only -0 became +0
    untouched = codes != 0x80
    assert torch.equal(out.codes[untouched], codes[untouched])


def test_fnuz_to_fn_is_the_exact_inverse_and_refuses_240() -> None:
    state = _state(_all_codes(32), [0.375, 3.0e-3], (16, 16))
    there = normalize_e4m3fn_to_e4m3fnuz(state)
    back = normalize_e4m3fnuz_to_e4m3fn(there)
    assert back.scheme == state.scheme
    assert torch.equal(back.weight_scale, state.weight_scale)
    assert torch.equal(_values(back), _values(state))
    assert torch.equal(back.codes, there.codes)  # same bits, -0 already gone
    with_240 = replace(there, codes=torch.full_like(there.codes, 0x7F))
    with pytest.raises(LoadError, match="240"):
        normalize_e4m3fnuz_to_e4m3fn(with_240)


def test_a_gpu_kernel_refuses_a_layer_normalized_for_the_other_flavour() -> None:
    # The runtime scheme keeps its name through normalization; only its formats say which
    # platform it was loaded for. Dispatch by name alone once sent e4m3fn codes to a
    # gfx942 kernel, which read them as e4m3fnuz: every output halved.
    gfx942 = PlatformInfo("rocm", "gfx942", "test gpu", torch.__version__, None, "6.4")
    gfx950 = replace(gfx942, arch="gfx950")
    fn_state = _state(_all_codes(8), [1.0], (8,))
    fnuz = normalize_e4m3fn_to_e4m3fnuz(fn_state).scheme
    assert fnuz.name == fn_state.scheme.name
    assert foreign_fp8_flavour(fnuz, gfx942) is None
    assert foreign_fp8_flavour(fn_state.scheme, gfx950) is None
    why = foreign_fp8_flavour(fn_state.scheme, gfx942)
    assert why is not None
    assert "weight codes in e4m3fn," in why
    assert "take e4m3fnuz" in why
    why = foreign_fp8_flavour(fnuz, gfx950)
    assert why is not None
    assert "weight codes in e4m3fnuz," in why
    assert foreign_fp8_flavour(get_scheme("w_mxfp4_a_mxfp4"), gfx942) is None  # not FP8 e4m3


def test_normalize_twice_is_refused() -> None:
    state = normalize_e4m3fn_to_e4m3fnuz(_state(_all_codes(8), [1.0], (8,)))
    with pytest.raises(LoadError, match="not e4m3fn"):
        normalize_e4m3fn_to_e4m3fnuz(state)


def test_normalized_activation_saturates_at_the_same_real_value() -> None:
    out = normalize_e4m3fn_to_e4m3fnuz(_state(_all_codes(8), [1.0], (8,)))
    act = out.scheme.activation
    assert act is not None
    assert act.format == "e4m3fnuz"
    assert act.qmax == 224.0
    x = torch.tensor([1000.0, -1000.0, 3.3, -1e-9])
    fn = decode(encode(x, "e4m3fn"), "e4m3fn")
    fnuz = decode(encode(x / 2, "e4m3fnuz", act.clamp_max), "e4m3fnuz") * 2
    assert torch.equal(fn, fnuz)


@pytest.mark.parametrize("sentinel", [SCALE_SLOT_SENTINEL, float("-inf"), float("nan"), 0.0])
def test_requantize_excludes_and_flags_unloaded_slots(sentinel: float) -> None:
    codes = _all_codes(24)
    state = _state(codes, [0.5, sentinel, 0.125], (16, 0, 8))
    out = requantize_with_max_scale(state)
    assert out.weight_scale.tolist() == [0.5]
    assert out.unloaded == (1,)
    kept = codes[:16] != 0x80
    assert torch.equal(out.codes[:16][kept], codes[:16][kept]), "the max shard keeps its codes"
    assert not bool((out.codes == 0x80).any()), "zeros are stored as +0"
    # 0.125 / 0.5 is a power of two: requantization is exact unless it underflows below
    # e4m3fn's smallest normal 2^-6, where bits are lost (within one step of the grid).
    expected = decode(codes[16:], "e4m3fn") * 0.125
    got = decode(out.codes[16:], "e4m3fn") * 0.5
    stays_normal = expected.abs() / 0.5 >= 2**-6
    assert torch.equal(got[stays_normal], expected[stays_normal])
    assert one_ulp_violations(out.codes[16:], "e4m3fn", expected, 0.5) == 0


def test_requantize_after_normalize_still_flags_a_doubled_sentinel() -> None:
    state = _state(_all_codes(24), [0.5, SCALE_SLOT_SENTINEL, 0.125], (16, 0, 8))
    out = requantize_with_max_scale(normalize_e4m3fn_to_e4m3fnuz(state))
    assert out.unloaded == (1,)
    assert out.weight_scale.tolist() == [1.0]


def test_requantize_without_any_loaded_scale_is_an_error() -> None:
    state = _state(_all_codes(8), [float("nan")], (8,))
    with pytest.raises(LoadError, match="no shard's weight scale"):
        requantize_with_max_scale(state)


def test_requantize_loses_at_most_one_ulp() -> None:
    codes = _all_codes(32)
    state = _state(codes, [0.9, 0.0123], (16, 16), target="e4m3fn")
    out = requantize_with_max_scale(state)
    exact = decode(codes[16:], "e4m3fn") * torch.tensor(0.0123)
    assert one_ulp_violations(out.codes[16:], "e4m3fn", exact, 0.9) == 0
    # The check is not vacuous: one code off by two steps is caught.
    broken = out.codes[16:].clone()
    flat = broken.reshape(-1)
    j = int((decode(flat, "e4m3fn").abs() > 0.5).nonzero()[0])
    flat[j] = flat[j] + 2
    assert one_ulp_violations(broken, "e4m3fn", exact, 0.9) == 1


@pytest.mark.parametrize("seed", range(4))
def test_normalize_and_requantize_commute(seed: int) -> None:
    """The derivation in docs/LOADING.md, checked on random fused layers with all codes."""
    gen = torch.Generator().manual_seed(seed)
    codes = _all_codes(40)[torch.randperm(40, generator=gen)]
    decades = torch.randint(-4, 3, (3,), generator=gen).float()
    scales = ((0.1 + torch.rand(3, generator=gen)) * 10.0**decades).tolist()
    state = _state(codes, [*scales, SCALE_SLOT_SENTINEL], (16, 8, 16, 0))
    a = requantize_with_max_scale(normalize_e4m3fn_to_e4m3fnuz(state))
    b = normalize_e4m3fn_to_e4m3fnuz(requantize_with_max_scale(state))
    assert torch.equal(a.codes, b.codes)
    assert torch.equal(a.weight_scale, b.weight_scale)
    assert a.scheme == b.scheme
    assert a.unloaded == b.unloaded == (3,)


def test_merge_input_scales_takes_the_loaded_max() -> None:
    state = replace(
        _state(_all_codes(8), [1.0], (8,)),
        input_scale=torch.tensor([0.5, SCALE_SLOT_SENTINEL, 0.75]),
    )
    assert merge_input_scales(state).input_scale.tolist() == [[0.75]]  # type: ignore[union-attr]


def test_scales_to_tile_grid_refuses_shard_slots_for_a_per_tensor_kernel() -> None:
    state = _state(_all_codes(16), [1.0, 2.0], (8, 8))
    with pytest.raises(LoadError, match="requantize_with_max_scale first"):
        scales_to_tile_grid(state)


def test_mx_blocked_scale_layout() -> None:
    """The one MX scale layout (harness.ops.block_scaled) a loader would write: 128x4 tiles."""
    rows, cols = 130, 6  # padded to 256 x 8
    grid = torch.arange(rows * cols, dtype=torch.int32).reshape(rows, cols)
    blocked = swizzle_32_4_4(grid)
    assert blocked.numel() == 256 * 8
    n_col_tiles = 2
    for r, c in [(0, 0), (1, 0), (31, 3), (32, 0), (127, 3), (128, 5), (129, 4)]:
        tile = (r // 128) * n_col_tiles + c // 4
        offset = tile * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
        assert int(blocked[offset]) == int(grid[r, c]), (r, c)
    assert torch.equal(unswizzle_32_4_4(blocked, rows, cols), grid)
    with pytest.raises(ValueError, match="expected 2048"):
        unswizzle_32_4_4(blocked[:-1], rows, cols)


def test_bias_application_counts_tell_0_1_2_apart() -> None:
    y0 = torch.tensor([[1.0, -2.0, 3.0]])
    bias = torch.tensor([0.5, -1.0, 2.0])
    bound = torch.full_like(y0, 0.1)
    for n in (0, 1, 2):
        y = y0 + n * bias + 0.05
        assert bias_application_counts(y, y0, bias, bound).tolist() == [[n] * 3]
    assert bias_application_counts(y0 + 0.5 * bias, y0, bias, bound).tolist() == [[-1] * 3]
    with pytest.raises(ValueError, match="ambiguous"):
        bias_application_counts(y0, y0, bias, torch.full_like(y0, 0.3))


def test_the_bias_check_judges_only_outputs_where_the_bias_is_told_apart() -> None:
    y0 = torch.tensor([[1.0, -2.0, 3.0]])
    bias = torch.tensor([0.5, -1.0, 2.0])
    bound = torch.tensor([[0.3, 0.1, 0.1]])  # column 0: |bias| 0.5 <= 2 * 0.3
    counts = bias_application_counts(y0 + bias, y0, bias, bound, allow_ambiguous=True)
    assert counts.tolist() == [[AMBIGUOUS, 1, 1]]
    once = check_bias_applied_once(y0 + bias, y0, bias, bound, True, "p")
    assert once.passed
    assert once.metrics["bias_ambiguous"] == 1
    twice = y0 + torch.tensor([1.0, 1.0, 2.0]) * bias  # column 1 got it twice
    result = check_bias_applied_once(twice, y0, bias, bound, True, "p")
    assert not result.passed
    assert "applied [2] times" in result.message
    assert "1 outputs not judged" in result.message
    nothing = check_bias_applied_once(y0 + bias, y0, bias, torch.full_like(y0, 5.0), True, "p")
    assert not nothing.passed, "a check that can judge no output must not pass"


def test_every_granularity_and_flavour_loads_correctly() -> None:
    """Every registered FP8 scheme (each granularity, both flavours) through every loader."""
    reference = loaders()["fp8"]
    checked = 0
    refused: set[tuple[str, str]] = set()
    schemes = tuple(sorted(n for n, s in SCHEMES.items() if s.family == "fp8"))
    for scheme in schemes:
        for case in CASES:
            ckpt, _ = build_case_checkpoint(scheme, case.name)
            for flavour in FLAVOURS:
                for loader in loaders().values():
                    if not loader.supports(ckpt.scheme, flavour).ok:
                        refused.add((scheme, flavour))
                        with pytest.raises(LoadError, match="no exact conversion"):
                            loader.load(ckpt, flavour)
                        continue
                    problems = check_loader(loader, ckpt, flavour, reference)
                    assert not problems, f"{scheme}/{case.name}/{flavour}: {problems}"
                    checked += 1
    # Only e4m3fnuz schemes saturating above 224 have no exact e4m3fn form (240 -> 480 > 448).
    no_fn_form = {
        (n, "e4m3fn")
        for n in schemes
        if SCHEMES[n].weight.format == "e4m3fnuz" and SCHEMES[n].weight.qmax > 224
    }
    assert no_fn_form, "the registry should hold a 240-saturating e4m3fnuz scheme"
    assert refused == no_fn_form
    assert checked == (len(schemes) * 2 - len(no_fn_form)) * len(CASES) * len(loaders())
