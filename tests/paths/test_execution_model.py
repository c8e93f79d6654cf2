"""One execution model for linear and MoE: path defaults, numerics, kernel contracts,
dispatch tables, registries, and the primitives each has one home for."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.core.quantize import quantize_activation
from harness.core.schemes import SCHEMES, get_scheme
from harness.linear.paths import linear_paths
from harness.linear.paths.native import (
    KERNELS,
    LINEAR_NATIVE_DISPATCH,
    SCALED_MM_SCHEMES,
    NativeScaledMMPath,
    linear_dispatch_problems,
)
from harness.moe.dispatch import MOE_NATIVE_DISPATCH, MOE_SCHEMES
from harness.moe.model import quantize_operand
from harness.moe.paths import moe_paths
from harness.moe.paths.kernels import MOE_KERNELS
from harness.paths.base import (
    EXACT_FP32,
    KernelContract,
    LinearPath,
    LinearPathBase,
    LinearProblem,
    Numerics,
    PathBase,
    Support,
    is_reference,
    kernel_name,
    linear_numerics,
    output_roundings,
    uses_capabilities,
)
from harness.paths.dispatch import ANY_PLATFORM, EMULATE, dispatch_problems, row_for
from harness.platform.info import PlatformInfo, platform_key
from harness.registry import Registry

HARNESS = Path(__file__).resolve().parents[2] / "harness"
CPU = PlatformInfo("cpu", "x86_64", "test cpu", torch.__version__, None, None)
H100 = PlatformInfo("cuda", "sm_90", "test gpu", torch.__version__, "12.8", None)
PROBLEM = LinearProblem(m=4, n=64, k=64, bias=True, out_dtype=torch.bfloat16)


# ------------------------------------------------------------------------ paths
class BarePlugin:
    """A path written against docs/PATHS.md alone: no base class, no optional members."""

    name = "bare"

    def supports(self, scheme: Any, problem: Any, platform: Any) -> Support:
        return Support.yes()

    def forward(self, layer: Any, x: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
        return x.to(out_dtype)


class LegacyPlugin(BarePlugin):
    """A plugin that declared its roundings the way paths did before `numerics`."""

    name = "legacy"

    def output_roundings(self, scheme: Any, problem: LinearProblem) -> int:
        return 2


def test_a_plugin_without_the_base_class_is_still_a_path_with_the_defaults() -> None:
    bare = BarePlugin()
    scheme = get_scheme("fp8_per_tensor")
    assert isinstance(bare, LinearPath)
    assert not isinstance(bare, PathBase)
    assert is_reference(bare) is False
    assert uses_capabilities(bare) == frozenset()
    assert kernel_name(bare, scheme, CPU) == "bare"
    assert linear_numerics(bare, scheme, PROBLEM) == Numerics(out_dtype=torch.bfloat16)
    assert output_roundings(LegacyPlugin(), scheme, PROBLEM) == 2


def test_builtin_paths_inherit_the_defaults_the_helpers_fall_back_to() -> None:
    scheme = get_scheme("fp8_per_tensor")
    for path in (*linear_paths.builtins, *moe_paths.builtins):
        assert isinstance(path, PathBase), path
    emulated, native = linear_paths()["emulated"], linear_paths()["native"]
    assert is_reference(emulated)
    assert not is_reference(native)
    assert is_reference(moe_paths()["emulated"])
    assert not is_reference(moe_paths()["native"])
    assert kernel_name(emulated, scheme, CPU) == "emulated"
    assert kernel_name(native, scheme, CPU) == "tensorwise"
    assert "scaled_mm.tensorwise.e4m3fn" in uses_capabilities(native)
    assert PathBase().uses_capabilities == frozenset()
    default = LinearPathBase().numerics(scheme, PROBLEM)
    assert default == Numerics(out_dtype=torch.bfloat16, output_roundings=1)


def test_native_numerics_count_the_unfused_bias_rounding() -> None:
    native = NativeScaledMMPath()
    no_bias = LinearProblem(4, 64, 64, bias=False, out_dtype=torch.bfloat16)
    assert output_roundings(native, get_scheme("fp8_per_tensor"), PROBLEM) == 1  # fused bias
    assert output_roundings(native, get_scheme("w_mxfp4_a_mxfp4"), PROBLEM) == 2  # epilogue
    assert output_roundings(native, get_scheme("w_mxfp4_a_mxfp4"), no_bias) == 1
    assert output_roundings(native, get_scheme("w_mxfp4"), PROBLEM) == 2  # no kernel: widest


def test_one_numerics_declaration_serves_linear_and_moe() -> None:
    """MoE kernels and linear paths declare the same dataclass; MoE's describe() text
    (recorded with each result) is unchanged."""
    bf16 = MOE_KERNELS["grouped_mm.bf16"].numerics(get_scheme("w_mxfp4"))
    assert isinstance(bf16, Numerics)
    assert bf16.describe() == "operands bfloat16, fp32 accumulate, out bfloat16, SiLU in float32"
    assert EXACT_FP32.describe() == "operands exact, fp32 accumulate, out float32, SiLU in float32"
    assert EXACT_FP32.accumulation_dtype == torch.float32


# -------------------------------------------------------------------- contracts
def test_linear_modes_and_grouped_kernels_share_one_contract_protocol() -> None:
    for kernel in (*KERNELS.values(), *MOE_KERNELS.values()):
        assert isinstance(kernel, KernelContract), kernel
        assert isinstance(kernel.accepts(get_scheme("fp8_per_tensor")), Support)


REFUSALS = [
    ("mx", "w_mxfp4_a_mxfp6_e3m2", "activation format e3m2 is not one of"),
    ("mx", "w_mxfp4_a_fp8", "element formats differ (e2m1 x e4m3fn)"),
    ("mx", "w_mxfp4", "activation is not quantized"),
    ("mx", "fp8_per_tensor", "weight scales are fp32, the kernel takes e8m0 scales"),
    ("tensorwise", "fp8_per_channel", "weight scales are per_row"),
    ("rowwise", "fp8_per_block", "weight scales are block_128x128"),
    ("blockwise", "fp8_per_channel", "weight scales are per_row"),
]


@pytest.mark.parametrize(
    ("mode", "scheme", "why"), REFUSALS, ids=[f"{m}-{s}" for m, s, _ in REFUSALS]
)
def test_linear_modes_refuse_what_their_kernels_cannot_run(
    mode: str, scheme: str, why: str
) -> None:
    support = KERNELS[mode].accepts(get_scheme(scheme))
    assert not support.ok
    assert why in support.reason


# ----------------------------------------------------------------- dispatch tables
def test_the_linear_table_is_checked_like_the_moe_table() -> None:
    assert linear_dispatch_problems() == []
    assert dispatch_problems(SCHEMES, KERNELS, LINEAR_NATIVE_DISPATCH) == []
    assert dispatch_problems(MOE_SCHEMES, MOE_KERNELS, MOE_NATIVE_DISPATCH) == []


def test_a_table_sending_a_mixed_mx_scheme_to_the_mx_kernel_is_a_problem() -> None:
    """The prefix bug as a linear table: every w_mxfp4* scheme sent to the MX kernel."""
    row = dict(LINEAR_NATIVE_DISPATCH[ANY_PLATFORM])
    prefixed = frozenset(n for n in SCHEMES if n[: len("w_mxfp4")] == "w_mxfp4")
    row["mx"] = row["mx"] | prefixed
    row[EMULATE] = row[EMULATE] - prefixed
    bad = {ANY_PLATFORM: row}
    problems = linear_dispatch_problems(bad)
    flagged = [p.split("'")[3] for p in problems]
    assert flagged == [
        "w_mxfp4",
        "w_mxfp4_a_fp8",
        "w_mxfp4_a_fp8_per_token",
        "w_mxfp4_a_mxfp6_e2m3",
        "w_mxfp4_a_mxfp6_e3m2",
    ]
    assert (
        "row '*' sends 'w_mxfp4_a_mxfp6_e3m2' to 'mx', which cannot run it: activation format "
        "e3m2 is not one of ['e2m1', 'e4m3fn']"
    ) in problems
    # And the path refuses such a table at run time instead of calling the kernel.
    native = NativeScaledMMPath(table=bad)
    support = native.supports(get_scheme("w_mxfp4_a_mxfp6_e3m2"), PROBLEM, H100)
    assert not support.ok
    assert "dispatch table error: mx cannot run w_mxfp4_a_mxfp6_e3m2" in support.reason


def test_the_linear_row_applies_on_every_platform_and_names_every_scheme() -> None:
    for platform in (CPU, H100):
        assert row_for(LINEAR_NATIVE_DISPATCH, platform_key(platform)) is not None
    assert row_for(MOE_NATIVE_DISPATCH, "sm_12") is None  # MoE rows are per platform
    assert set(SCALED_MM_SCHEMES) | LINEAR_NATIVE_DISPATCH[ANY_PLATFORM][EMULATE] == set(SCHEMES)
    reason = NativeScaledMMPath().supports(get_scheme("w_mxfp4"), PROBLEM, CPU).reason
    assert reason == (
        "emulated-only: no native kernel for w_mxfp4 (activations stay unquantized; "
        "scaled-mm kernels take two quantized operands)"
    )


def test_one_platform_key_rule() -> None:
    assert platform_key(CPU) == "cpu"
    assert platform_key(H100) == "sm_90"


# ------------------------------------------------------------- one of each primitive
def test_one_registry_type_serves_paths_moe_paths_and_loaders() -> None:
    from harness.loading.loaders import loaders

    for registry, group in (
        (linear_paths, "qharness.paths"),
        (moe_paths, "qharness.moe_paths"),
        (loaders, "qharness.loaders"),
    ):
        assert isinstance(registry, Registry)
        assert registry.group == group


def test_linear_and_moe_quantize_activations_with_one_quantizer() -> None:
    x = torch.linspace(-3, 5, 4 * 64).reshape(4, 64)
    for name in ("fp8_per_channel", "w_mxfp4_a_mxfp4", "fp8_per_block"):
        scheme = get_scheme(name)
        linear = quantize_activation(x, scheme, None)
        moe = quantize_operand(x, scheme.activation, None).quantized
        assert linear is not None
        assert moe is not None
        assert torch.equal(linear.codes, moe.codes)
        assert torch.equal(linear.scale, moe.scale)


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_scale_rules_do_not_import_the_scheme_registry() -> None:
    """scales.py and schemes.py once imported each other; both now read core.spec."""
    assert "harness.core.schemes" not in _imported_modules(HARNESS / "core" / "scales.py")


@pytest.mark.parametrize("constant", ["MX_BLOCK", "FP8_BLOCK"])
def test_each_block_size_has_one_home(constant: str) -> None:
    homes = []
    for source in sorted(HARNESS.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == constant for t in targets):
                homes.append(str(source.relative_to(HARNESS)))
    assert homes == ["core/spec.py"]


def test_one_mx_scale_swizzle() -> None:
    defining = [
        str(p.relative_to(HARNESS))
        for p in sorted(HARNESS.rglob("*.py"))
        if "def swizzle" in p.read_text() or "blocked_scale_layout" in p.read_text()
    ]
    assert defining == ["ops/block_scaled.py"]
