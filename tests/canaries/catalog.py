"""The canaries, what each one is, and which suite tests it can affect.

A selection is a list of pytest ``-k`` expressions, each naming one suite file's keyword
and the test ids the canary appears in (``<scheme>-<canary>-...``, a contract): only what
the bug can change, a few schemes each, so the whole run stays fast. A canary's control
runs the same selection with its own name, so a correct plugin is shown to pass exactly
where the canary is expected to fail.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LINEAR = "suites/test_linear.py"
LOADING = "suites/test_loading.py"
MEMORY = "suites/test_memory.py"
MOE = "suites/test_moe.py"
MOE_ROUTING = "suites/test_moe_routing.py"
TRACKER = "tests/memory/test_memory_tracker.py"
PLATFORM = "suites/test_platform.py"
FLOAT32_INPUTS = "suites/test_float32_activations.py"
SPECIAL_VALUES = "suites/test_special_values.py"
QUANTIZERS = "suites/test_quantizers.py"

# kind -> entry-point group it is registered in (None: planted by tests.canaries.mutants)
GROUPS: dict[str, str | None] = {
    "path": "qharness.paths",
    "moe_path": "qharness.moe_paths",
    "loader": "qharness.loaders",
    "quantizer": "qharness.quantizers",
    "mutant": None,
}


@dataclass(frozen=True)
class Selection:
    """The tests of one suite file a plugin named ``{name}`` is run on."""

    file: str
    keywords: str  # a -k expression with ``{name}`` where the plugin's name goes
    schemes: tuple[str, ...] = ()  # the schemes it selects (the self-test runs the first)

    def expression(self, name: str) -> str:
        keyword = self.file.rsplit("/", 1)[-1]
        return f"({keyword} and ({self.keywords.format(name=name)}))"


@dataclass(frozen=True)
class Canary:
    name: str  # entry-point name == the plugin's name in test ids
    bug: str  # the bug class
    kind: str  # a key of GROUPS
    target: str  # "module:attribute" of the plugin (kind "mutant": unused)
    control: str  # name of the correct plugin run on the same selection
    select: tuple[Selection, ...]
    isolated: bool = False  # needs its own pytest process (ids without its name, mutants)
    simulate: str | None = None  # QHARNESS_SIMULATE for it and its control (torch:<arch>)

    def expression(self, name: str | None = None) -> str:
        return " or ".join(s.expression(name or self.name) for s in self.select)

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.file for s in self.select))


def linear(
    schemes: tuple[str, ...], dtypes: Iterable[str] = ("bf16",), bias: str = "bias"
) -> Selection:
    """test_linear cases of ``schemes`` (every shape) with ``bias`` and ``dtypes``, and every
    case of the file's other per-path tests (case families) for those schemes."""
    which = " or ".join(f"{s}-{{name}}-" for s in schemes)
    outputs = " or ".join(f"-{bias}-{d}" for d in dtypes)
    return Selection(LINEAR, f"({which}) and ({outputs} or not test_linear[)", tuple(schemes))


def float32_inputs(schemes: tuple[str, ...]) -> Selection:
    return Selection(FLOAT32_INPUTS, " or ".join(f"{s}-{{name}}-" for s in schemes), schemes)


def special_values(schemes: tuple[str, ...]) -> Selection:
    """The NaN/inf family: ids are ``<scheme>-<path>-<kind>``."""
    return Selection(SPECIAL_VALUES, " or ".join(f"{s}-{{name}}-" for s in schemes), schemes)


def memory(schemes: tuple[str, ...]) -> Selection:
    return Selection(MEMORY, " or ".join(f"{s}-{{name}}-" for s in schemes), schemes)


def moe(schemes: tuple[str, ...], tokens: Iterable[int] = (7,)) -> Selection:
    which = " or ".join(f"{s}-{{name}}-" for s in schemes)
    counts = " or ".join(f"-t{t}-" for t in tokens)
    return Selection(MOE, f"({which}) and ({counts})", schemes)


def moe_long_k(schemes: tuple[str, ...]) -> Selection:
    """The long-hidden MoE design (`harness.moe.designs`) of ``schemes``."""
    which = " or ".join(f"{s}-{{name}}-" for s in schemes)
    return Selection(MOE, f"test_moe_long_k and ({which})", schemes)


def moe_bias(schemes: tuple[str, ...]) -> Selection:
    """The expert-bias MoE cases (`harness.moe.bias_cases`) of ``schemes``."""
    which = " or ".join(f"{s}-{{name}}-" for s in schemes)
    return Selection(MOE, f"test_moe_expert_bias and ({which})", schemes)


def moe_routing(schemes: tuple[str, ...]) -> Selection:
    """Every self-routing case (configs x scoring x renormalize) of ``schemes``."""
    return Selection(MOE_ROUTING, " or ".join(f"{s}-{{name}}-" for s in schemes), schemes)


def loading(
    schemes: tuple[str, ...], flavours: tuple[str, ...], path: str = "emulated"
) -> Selection:
    """Loading tests of ``schemes`` on ``flavours`` for the loader ``{name}`` (through
    ``path``), and the loaders' bit-for-bit agreement (its ids name no loader)."""
    which = " or ".join(f"{s}-" for s in schemes)
    flavour = (
        " or ".join(f"-{f}-" for f in flavours) + " or " + " or ".join(f"-{f}]" for f in flavours)
    )
    loader = f"(-{{name}}] or -{{name}}-{path}- or loaders_agree)"
    return Selection(LOADING, f"({which}) and ({flavour}) and {loader}", schemes)


def quantizers(schemes: tuple[str, ...]) -> Selection:
    """Quantizer-suite cases of the quantizer ``{name}``: ids are ``<quantizer>-<scheme>-...``."""
    which = " or ".join(f"{{name}}-{s}-" for s in schemes)
    return Selection(QUANTIZERS, which, schemes)


def loading_path(schemes: tuple[str, ...], flavour: str = "e4m3fn") -> Selection:
    """Loaded-layer output through the path ``{name}`` (fp8 loader)."""
    which = " or ".join(f"{s}-" for s in schemes)
    return Selection(LOADING, f"({which}) and -{flavour}-fp8-{{name}}-", schemes)


FP8 = ("fp8_per_tensor", "fp8_per_channel")
P = "tests.canaries.paths"
M = "tests.canaries.moe"
L = "tests.canaries.loaders"
Q = "tests.canaries.quantizers"


def _path(
    name: str,
    cls: str,
    bug: str,
    *select: Selection,
    native: bool = False,
    control: str = "control_kernel",
) -> Canary:
    control = "control_native" if native else control
    return Canary(name, bug, "path", f"{P}:{cls}", control, select)


def _moe(name: str, cls: str, bug: str, *select: Selection) -> Canary:
    return Canary(name, bug, "moe_path", f"{M}:{cls}", "control_moe", select)


def _router(name: str, cls: str, bug: str) -> Canary:
    sel = moe_routing(("fp8_per_tensor",))
    return Canary(name, bug, "moe_path", f"{M}:{cls}", "control_moe_router", (sel,))


def _loader(name: str, obj: str, bug: str, *select: Selection) -> Canary:
    return Canary(name, bug, "loader", f"{L}:{obj}", "control_loader", select, isolated=True)


def _quantizer(name: str, cls: str, bug: str, *select: Selection) -> Canary:
    return Canary(name, bug, "quantizer", f"{Q}:{cls}", "control_quantizer", select)


def _mutant(name: str, bug: str) -> Canary:
    sel = (Selection(TRACKER, "measure_peak or cuda"),)
    return Canary(name, bug, "mutant", "", "control_measurement", sel, isolated=True)


def _platform_mutant(name: str, bug: str, simulate: str) -> Canary:
    sel = (Selection(PLATFORM, "platform or flavour"),)
    return Canary(name, bug, "mutant", "", "control_platform", sel, True, simulate)


FNUZ = ("e4m3fnuz",)
STATIC = ("fp8_per_tensor", "fp8_w_per_channel_a_static")
MX = ("w_mxfp4_a_mxfp4", "w_mxfp8_a_mxfp8")
MXFP4 = ("w_mxfp4", "w_mxfp4_a_mxfp4")
# Dynamic activation scales (the flushed subnormals are too small to move an output) and
# weights with several scale blocks per row (one block's scale can be off alone).
DYNAMIC = ("fp8_per_channel", "fp8_per_block", "w_mxfp8_a_mxfp8")
MULTI_BLOCK = ("w_mxfp8_a_mxfp8", "fp8_per_block", "w_mxfp4_a_mxfp4")

CANARIES: tuple[Canary, ...] = (
    # ---- seed bugs
    _loader(
        "canary_loader_step_order",
        "STEP_ORDER",
        "seed: loader step order on fnuz",
        loading(STATIC, FNUZ),
    ),
    _path(
        "canary_native_nobias",
        "NativeDropsBias",
        "seed: dropped bias on the native path",
        linear(FP8),
        loading_path(FP8),
        native=True,
    ),
    _path(
        "canary_mxfp4_prefix",
        "Mxfp4PrefixDispatch",
        "seed: prefix dispatch of mixed MX schemes (linear)",
        linear(("w_mxfp4", "w_mxfp4_a_mxfp6_e3m2", "w_mxfp4_a_fp8")),
    ),
    _moe(
        "canary_moe_mxfp4_prefix",
        "Mxfp4PrefixTable",
        "seed: prefix dispatch of mixed MX schemes (MoE table)",
        moe(("w_mxfp4_a_mxfp4", "w_mxfp4", "w_mxfp4_a_mxfp6_e3m2", "w_mxfp4_a_fp8")),
        Selection(MOE, "dispatch_table and {name}"),
    ),
    _path(
        "canary_native_1d_scales",
        "NativeOneDimScales",
        "seed: 1-D scales to a row-wise kernel",
        linear(("fp8_per_channel", "fp8_w_per_channel_a_static")),
        native=True,
    ),
    _mutant("canary_total_minus_free", "seed: peak memory as total minus free"),
    _mutant("canary_is_cuda_gating", "seed: memory check gated on is_cuda()"),
    Canary(
        "canary_nvfp4_fused_one_global",
        "fused NVFP4 shards served under one shard's global, block scales kept",
        "mutant",
        "",
        "control_fused_nvfp4",
        (Selection(LOADING, "fused_nvfp4"),),
        isolated=True,
    ),
    _platform_mutant(
        "canary_fp8_flavour_rocm_gating",
        "FP8 flavour gated on the device kind, not the arch (wrong under torch:gfx942)",
        "torch:gfx942",
    ),
    # ---- classes
    _path("canary_ties_away", "TiesAway", "rounding ties (ties-away)", linear((*FP8, *MX))),
    _path(
        "canary_clamp240",
        "Clamp240",
        "clamp 240 vs 224",
        linear(("fp8_per_tensor_fnuz_clamp224", "fp8_per_channel_fnuz_clamp224")),
    ),
    _path("canary_static_ignored", "StaticScaleIgnored", "static scale ignored", linear(STATIC)),
    _path(
        "canary_specials_flushed",
        "SpecialValuesFlushed",
        "special values (NaN/inf flushed)",
        linear(("fp8_per_tensor", "w_mxfp8_a_mxfp8")),
        special_values(("fp8_per_tensor", "w_mxfp8_a_mxfp8")),
    ),
    _path(
        "canary_assumes_contiguous",
        "AssumesContiguous",
        "strided input assumed contiguous",
        linear(("fp8_per_channel", "w_mxfp4_a_mxfp4")),
    ),
    _path(
        "canary_partial_block",
        "PartialBlockScale",
        "partial blocks",
        linear((*MX, "fp8_per_block")),
    ),
    _path(
        "canary_block_index",
        "BlockIndex",
        "block-index error",
        linear(("fp8_per_block", "w_mxfp4_a_mxfp4")),
    ),
    _path("canary_scale_rceil", "ScaleRoundingRceil", "scale rounding mode", linear(MX)),
    _path(
        "canary_bf16_before_scale",
        "Bf16BeforeScale",
        "bf16 round trip before the scale",
        linear((*FP8, "w_mxfp4")),
        float32_inputs((*FP8, "w_mxfp4")),
    ),
    _path("canary_fp4_nibble_order", "Fp4NibbleOrder", "FP4 nibble order", linear(MXFP4)),
    _path("canary_fp4_decode_table", "Fp4DecodeTable", "FP4 decode table", linear(MXFP4)),
    _path(
        "canary_channel_axis",
        "ChannelAxis",
        "per-channel axis",
        linear(("fp8_per_channel", "fp8_per_channel_fnuz")),
    ),
    _path(
        "canary_bf16_accumulation",
        "Bf16Accumulation",
        "accumulation precision (bf16)",
        linear(("fp8_per_tensor", "w_mxfp8_a_mxfp8"), dtypes=("fp32",)),
    ),
    _path(
        "canary_out_dtype_via_bf16",
        "OutDtypeViaBf16",
        "out_dtype",
        linear(("fp8_per_tensor",), dtypes=("fp16", "fp32")),
    ),
    _path(
        "canary_native_fp32_nobias",
        "NativeNoFp32Bias",
        "bias per dtype",
        linear(FP8, dtypes=("fp32",)),
        native=True,
    ),
    _path(
        "canary_native_weight_cache",
        "NativeWeightCache",
        "weight caching",
        memory(FP8),
        linear(("fp8_per_tensor",)),
        native=True,
    ),
    _loader(
        "canary_loader_fused_requant",
        "FUSED_REQUANT",
        "fused-shard requantization",
        loading(("fp8_per_tensor",), ("e4m3fn", "e4m3fnuz")),
    ),
    _loader(
        "canary_loader_shard_scales",
        "SHARD_SCALES",
        "fused shards keep their own scales",
        loading(("fp8_per_tensor",), ("e4m3fn", "e4m3fnuz")),
    ),
    _loader(
        "canary_loader_neighbour_scales",
        "NEIGHBOUR_SCALES",
        "fused shards read a neighbour's per-channel or block scales",
        loading(("fp8_per_block", "fp8_per_channel"), ("e4m3fn", "e4m3fnuz")),
    ),
    _loader(
        "canary_loader_fnuz_scale",
        "FNUZ_SCALE",
        "fnuz scale doubling",
        loading(STATIC, FNUZ),
    ),
    _loader("canary_loader_0x80", "FNUZ_0X80", "fnuz 0x80 code", loading(STATIC, FNUZ)),
    _path(
        "canary_nvfp4_scale_ftz",
        "Nvfp4BlockScaleFlush",
        "NVFP4 E4M3 block scales in E4M3's subnormal range flushed to zero",
        linear(("w_nvfp4", "w_nvfp4_a_nvfp4"), dtypes=("bf16", "fp32")),
    ),
    _path(
        "canary_shown_subnormal_ftz",
        "ShownSubnormalFlush",
        "shown operands: subnormal flush-to-zero",
        linear(DYNAMIC),
        control="control_operands",
    ),
    _path(
        "canary_weight_scale_binade",
        "WeightScaleBinade",
        "one weight block scale a binade off",
        linear(MULTI_BLOCK),
        control="control_operands",
    ),
    _moe(
        "canary_moe_routing_order",
        "RoutingSlotOrder",
        "MoE routing order",
        moe(("fp8_per_tensor",)),
    ),
    _moe(
        "canary_moe_renormalize",
        "AlwaysRenormalize",
        "MoE renormalization",
        moe(("fp8_per_tensor",)),
    ),
    _moe(
        "canary_moe_expert_index",
        "ExpertIndex",
        "MoE expert index",
        moe(("w_mxfp4",), tokens=(1, 7)),  # the bf16 grouped kernel on every platform
    ),
    _moe(
        "canary_moe_silu_bf16",
        "SiluInBf16",
        "activation precision (SiLU in bf16)",
        moe(("fp8_per_tensor", "w_mxfp4")),
    ),
    _moe(
        "canary_moe_prefix_amax",
        "MoEPrefixAmax",
        "per-token amax over a prefix of the MoE hidden size",
        moe_long_k(("fp8_per_channel",)),
    ),
    _router("canary_moe_router_ties_high", "RouterTiesToHigher", "MoE routing ties (higher index)"),
    _router(
        "canary_moe_router_softmax_after_topk",
        "RouterSoftmaxAfterTopk",
        "MoE routing softmax after top-k",
    ),
    _router(
        "canary_moe_router_renorm_ignored",
        "RouterRenormalizeIgnored",
        "MoE routing renormalize flag ignored",
    ),
    _router(
        "canary_moe_router_renorm_always",
        "RouterRenormalizeAlways",
        "MoE routing renormalized whatever the flag",
    ),
    _router(
        "canary_moe_router_sigmoid_as_softmax",
        "RouterSigmoidAsSoftmax",
        "MoE routing sigmoid scored as softmax",
    ),
    _router(
        "canary_moe_router_bf16_ranking",
        "RouterRanksBf16Scores",
        "MoE routing ranked on bf16-rounded scores",
    ),
    _router(
        "canary_moe_router_bias_in_weights",
        "RouterBiasInWeights",
        "MoE routing correction bias in the weights",
    ),
    _router(
        "canary_moe_router_mask_zero",
        "RouterMasksWithZero",
        "MoE grouped routing masks other groups with 0, not -inf",
    ),
    Canary(
        "canary_moe_bias_twice",
        "MoE expert bias applied twice",
        "moe_path",
        f"{M}:BiasTwice",
        "control_moe_bias",
        (moe_bias(("fp8_per_tensor", "w_mxfp4_a_mxfp4")),),
    ),
    Canary(
        "canary_moe_bias_before_dequant",
        "MoE expert bias added before dequantization",
        "moe_path",
        f"{M}:BiasBeforeDequant",
        "control_moe_bias",
        (moe_bias(("fp8_per_tensor", "fp8_per_channel")),),
    ),
    # ---- round two: classes shown by the input designs (harness/linear/designs.py,
    # harness/core/hard_inputs.py); docs/TEETH.md says which check catches each
    _path(
        "canary_mx_scale_bf16_copy",
        "MxScaleFromBf16Copy",
        "MX scale from a bf16 copy of an fp32 activation",
        linear(("w_mxfp4_a_mxfp4", "w_mxfp8_a_mxfp8")),
        float32_inputs(("w_mxfp8_a_mxfp8",)),
    ),
    _path(
        "canary_static_reciprocal",
        "StaticReciprocal",
        "static quantization by rounded reciprocal",
        linear(STATIC),
        loading_path(STATIC),
    ),
    _path(
        "canary_prefix_amax",
        "PrefixAmax",
        "per-token amax over a prefix of K",
        linear(("fp8_per_channel",)),
        loading_path(("fp8_per_channel",)),
        float32_inputs(("fp8_per_channel",)),
    ),
    _path(
        "canary_fp16_saturate",
        "SaturatingFp16",
        "saturating fp16 output (undeclared)",
        linear(("fp8_per_tensor", "w_mxfp8_a_mxfp8"), dtypes=("fp16",)),
    ),
    _quantizer(
        "canary_quantizer_bf16_input",
        "Bf16InputQuantizer",
        "quantizer rounds a float32 input to bf16",
        quantizers(("fp8_per_channel", "fp8_per_tensor", "w_mxfp4", "w_mxfp8_a_mxfp8")),
    ),
    _quantizer(
        "canary_quantizer_e4m3_min_normal_scale",
        "E4M3MinNormalScaleQuantizer",
        "E4M3 block scales bounded at the smallest normal 2^-6",
        quantizers(("w_nvfp4",)),
    ),
    Canary(
        "canary_quantizer_fault_under_finding",
        "a second fault under a declared engine finding",
        "quantizer",
        f"{Q}:FaultUnderFindingQuantizer",
        "control_quantizer_finding",
        (quantizers(("w_mxfp4",)),),
    ),
    _path(
        "canary_subnormal_ftz",
        "SubnormalFlushToZero",
        "subnormal flush-to-zero, dynamic scales",
        linear(("fp8_per_channel", "w_mxfp8_a_mxfp8")),
    ),
    _path(
        "canary_scale_grid_transposed",
        "TransposedScaleGrid",
        "transposed 128x128 weight-scale grid",
        linear(("fp8_per_block",)),
    ),
    _path(
        "canary_scale_bf16",
        "ScaleInBf16",
        "scale applied in bf16",
        linear(("fp8_per_tensor",), dtypes=("bf16", "fp32")),
    ),
    _path(
        "canary_layout_from_shape",
        "WeightLayoutFromShape",
        "weight layout guessed from its shape (wrong only where N == K)",
        linear(("fp8_per_channel",)),
    ),
    _path(
        "canary_block_rows_by_block_k",
        "BlockRowsByBlockK",
        "weight scales indexed by block_k where block_n belongs (non-square blocks only)",
        linear(("fp8_per_block",)),
    ),
    _path(
        "canary_activation_group_128",
        "ActivationGroup128",
        "activation groups of a hard-wired 128, not the weight's block_k",
        linear(("fp8_per_block",)),
    ),
    _path(
        "canary_splitk_drops_tail",
        "SplitKDropsTail",
        "split-K dropping a last piece of fewer blocks",
        linear(("fp8_per_block", "fp8_per_channel")),
    ),
)

# Correct plugins: each must pass every selection of the canaries that name it.
CONTROLS: dict[str, tuple[str, str]] = {  # name -> (kind, target)
    "control_kernel": ("path", f"{P}:ControlKernelPath"),
    "control_native": ("path", f"{P}:ControlNativePath"),
    "control_operands": ("path", f"{P}:ControlOperandsPath"),
    "control_moe": ("moe_path", f"{M}:ControlMoEPath"),
    "control_moe_router": ("moe_path", f"{M}:ControlRouterMoEPath"),
    "control_moe_bias": ("moe_path", f"{M}:ControlBiasMoEPath"),
    "control_loader": ("loader", f"{L}:CONTROL_LOADER"),
    "control_quantizer": ("quantizer", f"{Q}:ControlQuantizer"),
    "control_quantizer_finding": ("quantizer", f"{Q}:DeclaredFindingQuantizer"),
    "control_measurement": ("mutant", ""),
    "control_platform": ("mutant", ""),
    "control_fused_nvfp4": ("mutant", ""),
}
