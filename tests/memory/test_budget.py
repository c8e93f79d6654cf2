"""The memory model against real tensors, and the forward check against paths that waste
memory on purpose (it must catch them) and the real ones (it must pass them).

Specs are written by hand (as the registered MX and FP8-block schemes define them), so each
layout is pinned here independently of the registry.
"""

from __future__ import annotations

import pytest
import torch

from harness.core.formats import pack_fp4
from harness.core.inputs import bias_vector, scaled_normal
from harness.core.quantize import QuantizedLinear, QuantizedTensor, quantize, quantize_linear
from harness.core.schemes import SCHEMES, QuantSpec, Scheme, get_scheme
from harness.linear.paths import get_path
from harness.memory.budget import (
    HELD,
    IDEAL,
    PACKED,
    forward_budget,
    held_layer_bytes,
    layer_bytes,
    tensor_bytes,
)
from harness.memory.check import MEMORY_SHAPES, check_forward_memory
from harness.paths import LinearProblem
from harness.platform.info import PlatformInfo

CPU = PlatformInfo("cpu", "test", "test", torch.__version__, None, None)
CUDA = PlatformInfo("cuda", "sm_90", "test", torch.__version__, "12.8", None)
ROCM = PlatformInfo("rocm", "gfx942", "test", torch.__version__, None, "6.4")

MXFP4 = QuantSpec("e2m1", block=(1, 32), scale_format="e8m0", scale_rounding="floor")
MXFP6 = QuantSpec("e3m2", block=(1, 32), scale_format="e8m0", scale_rounding="floor")
MXFP8 = QuantSpec("e4m3fn", block=(1, 32), scale_format="e8m0", scale_rounding="floor")
FP8_BLOCK = QuantSpec("e4m3fn", block=(128, 128))
FP8_ROW = QuantSpec("e4m3fn", block=(1, None))
FP8_TENSOR = QuantSpec("e4m3fn")
SPECS = {
    "mxfp4": MXFP4,
    "mxfp6": MXFP6,
    "mxfp8": MXFP8,
    "fp8_block": FP8_BLOCK,
    "fp8_row": FP8_ROW,
    "fp8_tensor": FP8_TENSOR,
}


def _hand_scheme(name: str, spec: QuantSpec) -> Scheme:
    """Weight ``spec``; activations per token in groups of the weight's block width."""
    block = (1, spec.block[1])
    activation = QuantSpec(spec.format, block, spec.scale_format, spec.scale_rounding, dynamic=True)
    return Scheme(name, "test", spec, activation, sqnr_floor_db=0.0, description="test only")


# ------------------------------------------------------------------ weight bytes
def test_mxfp4_packed_model_is_the_hand_formula_and_real_packed_bytes() -> None:
    n, k = 64, 256
    packed = tensor_bytes(MXFP4, (n, k), PACKED)
    assert (packed.codes, packed.scales) == (n * k // 2, n * k // 32)
    q = quantize(scaled_normal("budget/mxfp4", n, k, MXFP4), MXFP4)
    codes = pack_fp4(q.codes)  # two codes per byte, as FP4 kernels take them
    scales = q.scale.to(torch.float8_e8m0fnu)  # one byte per E8M0 scale
    assert codes.nbytes == packed.codes
    assert scales.nbytes == packed.scales


def test_ideal_model_counts_element_bits() -> None:
    n, k = 64, 256
    assert tensor_bytes(MXFP6, (n, k), IDEAL).codes == n * k * 6 // 8
    assert tensor_bytes(MXFP6, (n, k), PACKED).codes == n * k  # one 6-bit code per byte
    assert tensor_bytes(MXFP4, (n, k), IDEAL).codes == n * k // 2
    assert tensor_bytes(FP8_TENSOR, (n, k), IDEAL) == tensor_bytes(FP8_TENSOR, (n, k), PACKED)


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("shape", [(64, 256), (200, 384)], ids=["64x256", "200x384"])
def test_held_model_matches_quantize_output(name: str, shape: tuple[int, int]) -> None:
    """The held layout is what quantize() returns: a uint8 code per element, float32
    scales on the tile grid (200 rows make a partial 128-row tile)."""
    spec = SPECS[name]
    n, k = shape
    q = quantize(scaled_normal(f"budget/{name}/{n}x{k}", n, k, spec), spec)
    model = tensor_bytes(spec, shape, HELD)
    assert model.codes == n * k
    assert (q.codes.untyped_storage().nbytes(), q.scale.untyped_storage().nbytes()) == (
        model.codes,
        model.scales,
    )


def test_scale_bytes_follow_the_scale_format() -> None:
    n, k = 64, 256
    assert tensor_bytes(MXFP8, (n, k), PACKED).scales == n * (k // 32) * 1  # E8M0: 1 byte
    assert tensor_bytes(FP8_ROW, (n, k), PACKED).scales == n * 4  # fp32: 4 bytes
    assert tensor_bytes(FP8_BLOCK, (200, 384), PACKED).scales == 2 * 3 * 4  # partial tiles
    assert tensor_bytes(MXFP8, (n, k), HELD).scales == n * (k // 32) * 4  # held as float32


def test_unknown_scale_format_is_a_clear_error() -> None:
    """Scale formats are a table (harness.core.scale_formats): a spec naming one that is
    not in it fails where it is made, before any size is asked of it."""
    with pytest.raises(KeyError, match="ue4m3"):
        tensor_bytes(QuantSpec("e4m3fn", scale_format="ue4m3"), (16, 32), PACKED)


def test_a_layer_holding_a_larger_buffer_is_caught() -> None:
    """A loader that keeps the codes as a slice of a bigger buffer (two copies) holds more
    than the model, and the measured bytes say so."""
    scheme = get_scheme("fp8_per_tensor")
    n, k = 64, 256
    x = scaled_normal("budget/two_copies/x", 4, k, scheme.activation)
    w = scaled_normal("budget/two_copies/w", n, k, scheme.weight)
    layer = quantize_linear(w, None, scheme, calibration=x)
    model = layer_bytes(scheme, n, k, bias=False)
    assert held_layer_bytes(layer)["layer"] == sum(model.values())
    doubled = torch.cat([layer.weight.codes, layer.weight.codes])[:n]
    wasteful = QuantizedLinear(
        scheme, QuantizedTensor(doubled, layer.weight.scale, scheme.weight), layer.input_scale, None
    )
    assert held_layer_bytes(wasteful)["weight"] == 2 * n * k + 4


# ------------------------------------------------------------------ forward budget
class DequantizeWeightPath:
    """Deliberately wasteful: dequantizes the whole weight to float32 before the GEMM."""

    name = "test_dequantize_weight"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        w = layer.weight.dequantize()
        y = x.float() @ w.t()
        return (y if layer.bias is None else y + layer.bias).to(out_dtype)


class Bf16WeightCopyPath:
    """Deliberately wasteful: runs the native kernel but also keeps a bf16 weight copy."""

    name = "test_bf16_weight_copy"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        copy = layer.weight.codes.to(torch.bfloat16)  # N*K*2 bytes
        y = get_path("native").forward(layer, x, out_dtype)
        del copy
        return y


def _fp8_layer(m: int, n: int, k: int) -> tuple[QuantizedLinear, torch.Tensor, LinearProblem]:
    scheme = get_scheme("fp8_per_tensor")
    x = scaled_normal(f"budget/fp8/{m}x{n}x{k}/x", m, k, scheme.activation)
    w = scaled_normal(f"budget/fp8/{m}x{n}x{k}/w", n, k, scheme.weight)
    bias = bias_vector(f"budget/fp8/{m}x{n}x{k}/bias", n)
    layer = quantize_linear(w, bias, scheme, calibration=x)
    return layer, x, LinearProblem(m, n, k, bias=True, out_dtype=torch.bfloat16)


@pytest.mark.parametrize("wasteful", [DequantizeWeightPath(), Bf16WeightCopyPath()])
def test_wasteful_paths_are_caught(wasteful: object) -> None:
    layer, x, problem = _fp8_layer(4, 1024, 256)
    result = check_forward_memory(wasteful, layer, x, problem, CPU)  # type: ignore[arg-type]
    assert not result.ok
    assert any("bf16 copy of the [1024, 256] weight" in v for v in result.violations)
    assert any("exceeds the budget" in v for v in result.violations)
    assert result.peak_bytes >= 1024 * 256 * 2


def test_the_native_path_passes_the_same_check() -> None:
    layer, x, problem = _fp8_layer(4, 1024, 256)
    result = check_forward_memory(get_path("native"), layer, x, problem, CPU)
    assert result.ok, result.violations
    # It holds the activation codes and output only: far below a bf16 weight copy.
    assert result.peak_bytes < result.budget.total < 1024 * 256 * 2


def test_emulated_allowance_is_explicit() -> None:
    """The emulated code under another name gets the kernel budget and is caught."""
    layer, x, problem = _fp8_layer(4, 1024, 256)
    emulated = get_path("emulated")
    assert check_forward_memory(emulated, layer, x, problem, CPU).ok

    class Renamed:
        name = "test_emulated_renamed"
        forward = staticmethod(emulated.forward)

    result = check_forward_memory(Renamed(), layer, x, problem, CPU)  # type: ignore[arg-type]
    assert not result.ok
    terms = {t.name for t in forward_budget("emulated", layer.scheme, problem, CPU).terms}
    assert "weight_dequantize" in terms
    kernel_terms = {t.name for t in forward_budget("native", layer.scheme, problem, CPU).terms}
    assert not any("weight" in name for name in kernel_terms)


class _AnyKernelPath:
    """A path from nowhere in particular: no ``is_reference``, so a kernel's budget."""

    name = "any_kernel_path"
    supports = forward = None


def test_the_allowance_follows_is_reference_not_the_name() -> None:
    """The reference allowance is keyed on ``is_reference``: a reference under another name
    gets it, a non-reference named "emulated" does not."""
    scheme = SCHEMES["fp8_per_tensor"]
    problem = LinearProblem(4, 256, 256, bias=True, out_dtype=torch.bfloat16)

    class OtherReference(_AnyKernelPath):
        name, is_reference = "another_reference", True

    class NotTheReference(_AnyKernelPath):
        name, is_reference = "emulated", False

    reference = forward_budget(OtherReference(), scheme, problem, CPU)  # type: ignore[arg-type]
    assert reference.allows_full_precision_weight
    assert "weight_dequantize" in {t.name for t in reference.terms}
    impostor = forward_budget(NotTheReference(), scheme, problem, CPU)  # type: ignore[arg-type]
    assert not impostor.allows_full_precision_weight
    assert not any("weight" in t.name for t in impostor.terms)
    assert forward_budget("emulated", scheme, problem, CPU).allows_full_precision_weight


@pytest.mark.parametrize("name", ["mxfp4", "mxfp6", "mxfp8", "fp8_block"])
def test_emulated_budget_bounds_hand_made_schemes(name: str) -> None:
    """Schemes not registered yet still get a budget, and the emulated path keeps to it."""
    scheme = _hand_scheme(name, SPECS[name])
    m, n, k = 3, 200, 256  # 200 rows: a partial weight tile for 128-row blocks
    x = scaled_normal(f"budget/{name}/x", m, k, scheme.activation)
    w = scaled_normal(f"budget/{name}/w", n, k, scheme.weight)
    layer = quantize_linear(w, bias_vector(f"budget/{name}/bias", n), scheme)
    problem = LinearProblem(m, n, k, bias=True, out_dtype=torch.float16)
    result = check_forward_memory(get_path("emulated"), layer, x, problem, CPU)
    assert result.ok, result.violations
    assert result.peak_bytes > 0


@pytest.mark.parametrize("platform", [CPU, CUDA, ROCM], ids=["cpu", "cuda", "rocm"])
def test_memory_shapes_can_show_a_weight_copy(platform: PlatformInfo) -> None:
    """For every scheme (registered and hand-made), a kernel path's budget at the memory
    suite's shapes is below a bf16 weight copy, allowances for the GPU allocator included."""
    schemes = [*SCHEMES.values(), *(_hand_scheme(n, s) for n, s in SPECS.items())]
    for scheme in schemes:
        for m, n, k in MEMORY_SHAPES:
            problem = LinearProblem(m, n, k, bias=True, out_dtype=torch.float32)
            budget = forward_budget(_AnyKernelPath(), scheme, problem, platform)
            assert not budget.allows_full_precision_weight
            assert budget.total < n * k * 2, f"{scheme.name} {m}x{n}x{k}: {budget.describe()}"
    gpu_terms = {t.name for t in forward_budget("native", scheme, problem, platform).terms}
    assert ("device_scratch" in gpu_terms) == platform.is_cuda_alike


class CachingDequantizePath:
    """Deliberately wasteful: dequantizes the weight to float32 on its first call, keeps it
    on the layer and reuses it on every later call (a cache that outlives the forward)."""

    name = "test_caching_dequantize"

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        cached = getattr(layer, "_dequantized_weight", None)
        if cached is None:
            cached = layer.weight.dequantize()
            layer._dequantized_weight = cached  # type: ignore[attr-defined]
        y = get_path("native").forward(layer, x, out_dtype)
        return y + 0 * cached[: y.shape[1], :1].t().to(out_dtype)


class ModuleCachePath:
    """Deliberately wasteful: the same cache, kept in a dict on the path, not the layer."""

    name = "test_module_cache"

    def __init__(self) -> None:
        self.cache: dict[int, torch.Tensor] = {}

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        if id(layer) not in self.cache:
            self.cache[id(layer)] = layer.weight.dequantize()
        return get_path("native").forward(layer, x, out_dtype)


def test_a_weight_cache_escapes_a_single_call_measured_after_a_warm_up() -> None:
    """The weakness the two-call check closes: measured alone after a warm-up on the same
    layer, the caching path allocates nothing weight-sized and looks like a kernel."""
    from harness.memory.tracker import measure_peak

    layer, x, problem = _fp8_layer(4, 1024, 256)
    path = CachingDequantizePath()
    path.forward(layer, x, problem.out_dtype)  # the old procedure's warm-up
    with measure_peak(CPU) as measured:
        path.forward(layer, x, problem.out_dtype)
    budget = forward_budget(path, layer.scheme, problem, CPU)  # type: ignore[arg-type]
    assert measured.peak_bytes <= budget.total < 1024 * 256 * 2


@pytest.mark.parametrize("cacher", [CachingDequantizePath, ModuleCachePath])
def test_a_path_keeping_a_dequantized_weight_between_calls_fails(cacher: type) -> None:
    layer, x, problem = _fp8_layer(4, 1024, 256)
    result = check_forward_memory(cacher(), layer, x, problem, CPU)
    assert not result.ok
    fp32_weight = 1024 * 256 * 4
    assert result.peak_bytes >= fp32_weight
    assert result.retained_bytes >= fp32_weight
    assert any("alive after their outputs were dropped" in v for v in result.violations)
    assert any("bf16 copy of the [1024, 256] weight" in v for v in result.violations)
    if cacher is CachingDequantizePath:
        assert result.layer_growth_bytes >= fp32_weight
        assert any("attach tensors" in v for v in result.violations)


def test_correct_paths_retain_nothing_and_leave_the_layer_alone() -> None:
    layer, x, problem = _fp8_layer(4, 1024, 256)
    for name in ("native", "emulated"):
        result = check_forward_memory(get_path(name), layer, x, problem, CPU)
        assert result.ok, result.violations
        assert (result.retained_bytes, result.layer_growth_bytes) == (0, 0)
