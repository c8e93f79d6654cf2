"""aiter's Triton GEMMs as qharness linear paths: FP8 per-token x per-channel (`gemm_a8w8`,
`gemm_a8w8_per_token_scale`), FP8 1x128 x 128x128 blocks (`gemm_a8w8_blockscale`), MXFP4
(`gemm_afp4wfp4`, `tl.dot_scaled`, gfx950) and per-token FP8 x MXFP4 (`gemm_a8wfp4`, gfx950).

The harness quantizes the activation with its reference quantizer (as the native path does)
and hands the kernel the checkpoint's codes and scales in aiter's layouts; aiter's own
wrapper picks the launch (its tuned config for the shape, read from its config files for the
arch's device) or, for the ``*_tails`` paths, a config whose blocks do not divide the suite's
shapes (BLOCK_K not dividing K, N not a multiple of BLOCK_N, partial M blocks, split-K where
the kernel has it). The activation codes keep the layout of the activation the suite feeds
(a transposed view stays transposed), so the kernel's stride handling is exercised.

Each path declares an explicit table: platform key -> kernel -> schemes (the FP8 flavour is
the arch's: e4m3fnuz on gfx942, e4m3fn on gfx950; MXFP4 only on gfx950). Rows exist for the
real GPUs and for their simulation (``triton-interpret-<arch>``).

Under Triton's interpreter each call runs with ``tl.assume`` as a hint (`assume_as_hint`)
and with FP8 NaN codes read as NaN (`harness.fp8_nan_codes_read_as_nan`: the interpreter's
own widening reads them as finite numbers, which no FP8 operand is), so the special-values
suite judges the kernel's NaN and Inf propagation, not the interpreter's decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from harness import (
    E8M0,
    FP8_BLOCK,
    MX_BLOCK,
    SCHEMES,
    WHOLE,
    DispatchTable,
    FindingCase,
    Kernel,
    KnownFinding,
    LinearPathBase,
    LinearProblem,
    MixedOperands,
    Numerics,
    OperandContract,
    OperandSide,
    PlatformInfo,
    QuantizedLinear,
    QuantizedTensor,
    Scheme,
    Support,
    choose,
    dispatch_problems,
    e8m0_encode,
    foreign_fp8_flavour,
    fp8_nan_codes_read_as_nan,
    pack_fp4,
    platform_key,
    quantize_activation,
    rest_emulated,
)
from qharness_aiter import ENGINE
from qharness_aiter.interpreter import assume_as_hint
from qharness_aiter.loader import AITER_ARCHS, aiter_triton, platform_support

Config = dict[str, Any]
Call = Callable[[Any, QuantizedTensor, QuantizedTensor, torch.dtype, "Config | None"], torch.Tensor]


def _like(codes: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Activation codes in the layout of the activation the suite fed (strides exercised)."""
    if not x.is_contiguous() and x.t().is_contiguous():
        return codes.t().contiguous().t()
    return codes.contiguous()


def _fp8(t: QuantizedTensor) -> torch.Tensor:
    return t.codes.view(
        torch.float8_e4m3fnuz if t.spec.format == "e4m3fnuz" else torch.float8_e4m3fn
    )


def _rows(scale: torch.Tensor, rows: int) -> torch.Tensor:
    """A per-tensor or per-row scale grid as the (rows, 1) float32 column aiter takes."""
    return scale.float().reshape(-1, 1).expand(rows, 1).contiguous()


def _config(
    module_name: str, m: int, n: int, k: int, overrides: dict[str, Any] | None
) -> dict[str, Any] | None:
    """None (aiter picks its tuned config) or the tuned config with ``overrides``."""
    if overrides is None:
        return None
    import importlib

    kernels = importlib.import_module(f"aiter.ops.triton._triton_kernels.{module_name}")
    return {**kernels._get_config(m, n, k), **overrides}


def _call_a8w8(
    mod: Any, xq: QuantizedTensor, w: QuantizedTensor, out: torch.dtype, cfg: dict[str, Any] | None
) -> torch.Tensor:
    m, n = xq.codes.shape[0], w.codes.shape[0]
    return mod.gemm_a8w8(
        _fp8(xq),
        _fp8(w),
        _rows(xq.scale, m),
        _rows(w.scale, n).reshape(1, n),
        None,
        out,
        config=cfg,
    )


def _call_per_token(
    mod: Any, xq: QuantizedTensor, w: QuantizedTensor, out: torch.dtype, cfg: dict[str, Any] | None
) -> torch.Tensor:
    m, n = xq.codes.shape[0], w.codes.shape[0]
    return mod.gemm_a8w8_per_token_scale(
        _fp8(xq), _fp8(w), _rows(xq.scale, m), _rows(w.scale, n), out, config=cfg
    )


_BLOCKSCALE_WEIGHT_BLOCKS = frozenset({(FP8_BLOCK, FP8_BLOCK), (FP8_BLOCK // 2, FP8_BLOCK)})


def _call_blockscale(
    mod: Any, xq: QuantizedTensor, w: QuantizedTensor, out: torch.dtype, cfg: dict[str, Any] | None
) -> torch.Tensor:
    return mod.gemm_a8w8_blockscale(
        _fp8(xq),
        _fp8(w),
        xq.scale.float().contiguous(),
        w.scale.float().contiguous(),
        out,
        config=cfg,
    )


def _call_afp4wfp4(
    mod: Any, xq: QuantizedTensor, w: QuantizedTensor, out: torch.dtype, cfg: dict[str, Any] | None
) -> torch.Tensor:
    return mod.gemm_afp4wfp4(
        pack_fp4(xq.codes),
        pack_fp4(w.codes),
        e8m0_encode(xq.scale).contiguous(),
        e8m0_encode(w.scale).contiguous(),
        out,
        config=cfg,
    )


def _call_a8wfp4(
    mod: Any, xq: QuantizedTensor, w: QuantizedTensor, out: torch.dtype, cfg: dict[str, Any] | None
) -> torch.Tensor:
    """gemm_a8wfp4 writes into a caller's (M, N) tensor: FP8 x with its (M, 1) float32 row
    scales, packed FP4 w with its (N, K//32) E8M0 bytes."""
    m, n = xq.codes.shape[0], w.codes.shape[0]
    y = torch.empty((m, n), dtype=out, device=xq.codes.device)
    mod.gemm_a8wfp4(
        _fp8(xq),
        pack_fp4(w.codes),
        y,
        _rows(xq.scale, m),
        e8m0_encode(w.scale).contiguous(),
        out,
        config=cfg,
    )
    return y


Block = tuple[int | None, int | None]


@dataclass(frozen=True, kw_only=True)
class AiterGemm(Kernel):
    """One aiter GEMM (the function in aiter.ops.triton.<name>): its contract, gated by the
    probe of its Triton dot (``tl.dot`` or ``tl.dot_scaled``) for the element format, and
    how to call it."""

    call: Call
    fused_bias: bool  # the kernel adds the bias itself
    probe_per_format: bool = True


_FP8 = frozenset({"e4m3fn", "e4m3fnuz"})
_TENSOR_OR_ROW = frozenset({(WHOLE, WHOLE), (1, WHOLE)})
GEMMS: dict[str, AiterGemm] = {
    g.name: g
    for g in (
        AiterGemm(
            "gemm_a8w8",
            OperandContract(_FP8, "fp32", _TENSOR_OR_ROW, _TENSOR_OR_ROW),
            probe="triton.dot",
            call=_call_a8w8,
            fused_bias=True,
        ),
        AiterGemm(
            "gemm_a8w8_per_token_scale",
            OperandContract(_FP8, "fp32", _TENSOR_OR_ROW, _TENSOR_OR_ROW),
            probe="triton.dot",
            call=_call_per_token,
            fused_bias=False,
        ),
        AiterGemm(
            "gemm_a8w8_blockscale",
            # the wrapper infers the scale blocks from the grids (GROUP_N, GROUP_K: the next
            # power of two of N / scale_n, K / scale_k), so 64-row blocks run; 64-wide ones
            # do not: it asserts GROUP_K == BLOCK_SIZE_K, 128 in its configs
            OperandContract(_FP8, "fp32", _BLOCKSCALE_WEIGHT_BLOCKS, frozenset({(1, FP8_BLOCK)})),
            probe="triton.dot",
            call=_call_blockscale,
            fused_bias=False,
        ),
        AiterGemm(
            "gemm_afp4wfp4",
            OperandContract(
                frozenset({"e2m1"}), "e8m0", frozenset({(1, MX_BLOCK)}), frozenset({(1, MX_BLOCK)})
            ),
            probe="triton.dot_scaled",
            call=_call_afp4wfp4,
            fused_bias=False,
        ),
        AiterGemm(
            "gemm_a8wfp4",
            MixedOperands(
                weight=OperandSide(frozenset({"e2m1"}), E8M0.name, frozenset({(1, MX_BLOCK)})),
                activation=OperandSide(frozenset({"e4m3fn"}), "fp32", frozenset({(1, WHOLE)})),
            ),
            probe="triton.dot_scaled",
            call=_call_a8wfp4,
            fused_bias=False,
        ),
    )
}

# Scheme tables, by FP8 flavour of the arch (explicit names; never prefixes).
_FP8_ROWWISE = {
    "gfx942": frozenset(
        {
            "fp8_per_channel_fnuz",
            "fp8_per_channel_fnuz_clamp224",
            "fp8_per_tensor_fnuz",
            "fp8_per_tensor_fnuz_clamp224",
            "fp8_w_per_channel_a_static_fnuz",
        }
    ),
    "gfx950": frozenset({"fp8_per_channel", "fp8_per_tensor", "fp8_w_per_channel_a_static"}),
}
_FP8_BLOCK = {"gfx942": frozenset({"fp8_per_block_fnuz"}), "gfx950": frozenset({"fp8_per_block"})}
_MXFP4 = {
    "gfx942": frozenset(),  # no scaled MFMA: aiter asserts is_fp4_avail()
    "gfx950": frozenset(
        {"w_mxfp4_a_mxfp4", "w_mxfp4_a_mxfp4@ceil", "w_mxfp4_a_mxfp4@even", "w_mxfp4_a_mxfp4@rceil"}
    ),
}
# FP8 e4m3 activations (float32 row scales) x MXFP4 weights: dot_scaled "e4m3" x "e2m1",
# gfx950 only (aiter asserts is_fp4_avail(); its FP8 operand is e4m3fn there).
_A8WFP4 = {"gfx942": frozenset(), "gfx950": frozenset({"w_mxfp4_a_fp8_per_token"})}
KERNEL_SCHEMES: dict[str, dict[str, frozenset[str]]] = {
    "gemm_a8w8": _FP8_ROWWISE,
    "gemm_a8w8_per_token_scale": _FP8_ROWWISE,
    "gemm_a8w8_blockscale": _FP8_BLOCK,
    "gemm_afp4wfp4": _MXFP4,
    "gemm_a8wfp4": _A8WFP4,
}


def table_for(kernel: str) -> DispatchTable:
    """The path's table: for each aiter arch, real and simulated, the kernel's schemes there
    and every other registered scheme emulated."""
    table: dict[str, dict[str, frozenset[str]]] = {}
    for arch in sorted(AITER_ARCHS):
        runs = KERNEL_SCHEMES[kernel][arch]
        row = rest_emulated({kernel: runs}, SCHEMES)
        table[arch] = row
        table[f"triton-interpret-{arch}"] = row
    return table


def table_problems() -> list[str]:
    """Every problem of every path's table (the self-test wants none)."""
    return [p for k in GEMMS for p in dispatch_problems(SCHEMES, GEMMS, table_for(k))]


# Configs that expose tails on the suite's shapes (M 37/1/8/3, N 16/128/144, K 128/256/176):
# BLOCK_K=64 does not divide K=176, BLOCK_N=32 does not divide N=144, BLOCK_M=16 leaves
# partial M blocks; split-K where the kernel has it. The blockscale kernel needs
# BLOCK_K == its 128 scale block and split-K pieces of whole scale blocks, so K tails come
# from K=176 itself there.
TAIL_CONFIGS: dict[str, dict[str, Any]] = {
    "gemm_a8w8": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
    },
    "gemm_a8w8_per_token_scale": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "NUM_KSPLIT": 2,
    },
    "gemm_a8w8_blockscale": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 2,
    },
    "gemm_afp4wfp4": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "NUM_KSPLIT": 1,
    },
    # split-K into two pieces of whole 128-wide K blocks (SPLITK_BLOCK_SIZE from K,
    # `_splitk_pieces`): at K=128 the second piece has no work and the reduce sums one.
    "gemm_a8wfp4": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 32,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "NUM_KSPLIT": 2,
    },
}


def _splitk_pieces(k: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """gemm_a8wfp4's SPLITK_BLOCK_SIZE for a tail config: K elements per piece, rounded up
    to whole BLOCK_SIZE_K blocks (the kernel steps each piece by whole blocks)."""
    block = cfg["BLOCK_SIZE_K"]
    per_piece = -(-k // cfg["NUM_KSPLIT"])
    return {**cfg, "SPLITK_BLOCK_SIZE": -(-per_piece // block) * block}


# Kernels whose tail or split-K config has fields that depend on the shape.
TAIL_DERIVED: dict[str, Callable[[int, dict[str, Any]], dict[str, Any]]] = {
    "gemm_a8wfp4": _splitk_pieces,
}

# Split-K launches: every aiter GEMM whose config takes NUM_KSPLIT, split 2 and 3 ways (2 and
# 4 for gemm_afp4wfp4 and gemm_a8wfp4: their wrappers hand NUM_KSPLIT to the reduce kernel
# as a tl.arange range, powers of two only, where the others pass next_power_of_2), with
# BLOCK_SIZE_K = 128 (blockscale's scale block, which its kernel needs) and the tail
# config's M and N blocks. Each wrapper sizes the pieces itself (gemm_a8wfp4 takes
# SPLITK_BLOCK_SIZE from the caller: `_splitk_pieces`, as its own _get_config does), so a
# piece that is not whole K blocks shows on K that is not a multiple of NUM_KSPLIT * 128
# (K = 176, and the designs' 384, 640, 4160, 4224).
SPLITK_COUNTS: dict[str, tuple[int, ...]] = {
    "gemm_a8w8_per_token_scale": (2, 3),
    "gemm_a8w8_blockscale": (2, 3),
    "gemm_afp4wfp4": (2, 4),
    "gemm_a8wfp4": (2, 4),
}
SPLITK_BLOCKS: dict[str, Any] = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 32,
    "BLOCK_SIZE_K": 128,
    "GROUP_SIZE_M": 1,
}


def splitk_piece(k: int, splits: int) -> int:
    """K elements per split-K piece as gemm_a8w8_blockscale's and
    gemm_a8w8_per_token_scale's wrappers set it: SPLITK_BLOCK_SIZE = cdiv(K, NUM_KSPLIT)."""
    return -(-k // splits)


def wrapper_block_k(block_k: int, piece: int) -> int:
    """BLOCK_SIZE_K as those two wrappers leave it for a piece: shrunk to next_power_of_2(piece)
    where it exceeds the piece, a quarter of that where that still exceeds it, at least 16."""
    if block_k > piece:
        block_k = 1 << (piece - 1).bit_length()
        if block_k > piece:
            block_k //= 4
    return max(block_k, 16)


# gemm_a8w8_blockscale asserts GROUP_K (its 128 scale block) == BLOCK_SIZE_K, which the
# wrapper shrinks below 128 where a piece is shorter: no launch for such K.
SPLITK_MIN_PIECE: dict[str, int] = {"gemm_a8w8_blockscale": FP8_BLOCK}
# gemm_a8wfp4 asserts w_scales has shape (N, K // 32): no partial MX block in K.
WHOLE_MX_BLOCKS_ONLY: frozenset[str] = frozenset({"gemm_a8wfp4"})
OUT_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)


class AiterLinearPath(LinearPathBase):
    """One aiter Triton GEMM under one launch config (aiter's tuned one, or `TAIL_CONFIGS`)."""

    name: ClassVar[str]
    kernel: ClassVar[str]
    tails: ClassVar[bool] = False
    ksplit: ClassVar[int] = 1  # > 1: `SPLITK_BLOCKS` split NUM_KSPLIT ways
    engine = ENGINE
    runs_kernel_source = True  # Triton source: interpreted on a simulated arch
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()

    def __init__(self) -> None:
        self.gemm = GEMMS[self.kernel]
        self.table = table_for(self.kernel)
        self.false_assumptions = 0  # tl.assume conditions the interpreter saw false
        self.nan_codes_read = 0  # FP8 NaN codes the interpreter widened to NaN (simulated)

    @property
    def uses_capabilities(self) -> frozenset[str]:
        return frozenset(
            self.gemm.capability(SCHEMES[name])
            for row in self.table.values()
            for name in row.get(self.kernel, frozenset())
        )

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        if self.ksplit > 1:
            config = f"split-K config, NUM_KSPLIT={self.ksplit}"
        else:
            config = "tail config" if self.tails else "aiter's tuned config"
        return f"aiter.ops.triton.{self.kernel} ({config})"

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """Exact operands, float32 accumulate; scales multiplied in float32 after the sum
        (per K block for blockscale); one rounding to the output dtype (a bias the kernel
        does not take is added to its float32 output first, then rounded once).

        Under Triton's interpreter the kernel's float32 -> bfloat16 conversion truncates
        (`INTERPRETER_NUMERICS`): declared as a rounding toward zero where the kernel
        converts (no bias, or a kernel that adds it), so the interpreter's conversion is
        never reported as the kernel's and the interval stays bit-exact; torch rounds the
        sum with a bias the kernel does not take to nearest."""
        from harness import detect_platform

        kernel_converts = self.gemm.fused_bias or not problem.bias
        truncates = (
            detect_platform().simulated == "triton-interpret"
            and problem.out_dtype == torch.bfloat16
            and kernel_converts
        )
        mode = "toward_zero" if truncates else "nearest"
        return Numerics(out_dtype=problem.out_dtype, rounding_mode=mode)

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        where = platform_support(self.name, platform, "tuned configs")
        if not where.ok:
            return where
        choice = choose(
            self.table, GEMMS, platform_key(platform), scheme, f"{self.name} dispatch", __name__
        )
        if choice.kernel is None:
            return Support.no(f"{self.name}: {choice.reason}")
        foreign = foreign_fp8_flavour(scheme, platform)
        if foreign:  # the arch's kernels take its own e4m3 flavour only
            return Support.no(f"{self.name}: {foreign}")
        if problem.out_dtype not in OUT_DTYPES:
            return Support.no(f"{self.name}: no {problem.out_dtype} output")
        if self.kernel in WHOLE_MX_BLOCKS_ONLY and problem.k % MX_BLOCK:
            return Support.no(
                f"{self.name}: K={problem.k} is not a multiple of {MX_BLOCK}; aiter's wrapper "
                f"asserts w_scales of shape (N, K//{MX_BLOCK}) (no partial MX block)"
            )
        least = SPLITK_MIN_PIECE.get(self.kernel, 0) if self.ksplit > 1 else 0
        if splitk_piece(problem.k, self.ksplit) < least:
            return Support.no(
                f"{self.name}: K={problem.k} in {self.ksplit} pieces of "
                f"{splitk_piece(problem.k, self.ksplit)} < {least}: aiter's wrapper shrinks "
                f"BLOCK_SIZE_K below its {least} scale block and asserts GROUP_K == BLOCK_SIZE_K"
            )
        return Support.yes()

    def overrides(self) -> dict[str, Any] | None:
        """The config fields this path sets over aiter's tuned config (None: aiter's own)."""
        if self.ksplit > 1:
            return {**SPLITK_BLOCKS, "NUM_KSPLIT": self.ksplit}
        return TAIL_CONFIGS[self.kernel] if self.tails else None

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        from harness import detect_platform

        platform = detect_platform()
        mod = aiter_triton(platform, self.kernel)
        xq = quantize_activation(x, layer.scheme, layer.input_scale)
        if xq is None:
            raise ValueError(f"{self.name}: the kernel takes a quantized activation")
        xq = QuantizedTensor(_like(xq.codes, x), xq.scale, xq.spec)
        m, k = xq.codes.shape
        n = layer.weight.codes.shape[0]
        cfg = _config(self.kernel, m, n, k, self.overrides())
        if cfg is not None and self.kernel in TAIL_DERIVED:
            cfg = TAIL_DERIVED[self.kernel](k, cfg)
        if not platform.simulated:
            return self._call(mod, xq, layer, out_dtype, cfg)
        with assume_as_hint() as seen, fp8_nan_codes_read_as_nan() as nan_codes:
            y = self._call(mod, xq, layer, out_dtype, cfg)
        self.false_assumptions += seen.count
        self.nan_codes_read += nan_codes.count
        return y

    def _call(
        self,
        mod: Any,
        xq: QuantizedTensor,
        layer: QuantizedLinear,
        out: torch.dtype,
        cfg: dict[str, Any] | None,
    ) -> torch.Tensor:
        if self.gemm.fused_bias:  # gemm_a8w8 adds a float32 bias to its float32 result
            m, n = xq.codes.shape[0], layer.weight.codes.shape[0]
            bias = None if layer.bias is None else layer.bias.float()
            return mod.gemm_a8w8(
                _fp8(xq),
                _fp8(layer.weight),
                _rows(xq.scale, m),
                _rows(layer.weight.scale, n).reshape(1, n),
                bias,
                out,
                config=cfg,
            )
        if layer.bias is None:
            return self.gemm.call(mod, xq, layer.weight, out, cfg)
        # no bias in the kernel: its float32 output, the bias added, one rounding (as fused)
        y = self.gemm.call(mod, xq, layer.weight, torch.float32, cfg)
        return (y + layer.bias.float()).to(out)


def _path(kernel: str, tails: bool, ksplit: int = 1) -> type[AiterLinearPath]:
    suffix = f"_splitk{ksplit}" if ksplit > 1 else "_tails" if tails else ""
    return type(
        f"Aiter_{kernel}{suffix}",
        (AiterLinearPath,),
        {
            "name": f"aiter_{kernel}{suffix}",
            "kernel": kernel,
            "tails": tails,
            "ksplit": ksplit,
            "__module__": __name__,
        },
    )


AiterGemmA8W8 = _path("gemm_a8w8", False)
AiterGemmA8W8Tails = _path("gemm_a8w8", True)
AiterGemmA8W8PerToken = _path("gemm_a8w8_per_token_scale", False)
AiterGemmA8W8PerTokenTails = _path("gemm_a8w8_per_token_scale", True)
AiterGemmA8W8Blockscale = _path("gemm_a8w8_blockscale", False)
AiterGemmA8W8BlockscaleTails = _path("gemm_a8w8_blockscale", True)
AiterGemmAFP4WFP4 = _path("gemm_afp4wfp4", False)
AiterGemmAFP4WFP4Tails = _path("gemm_afp4wfp4", True)
AiterGemmA8WFP4 = _path("gemm_a8wfp4", False)
AiterGemmA8WFP4Tails = _path("gemm_a8wfp4", True)
AiterGemmA8W8PerTokenSplitK2 = _path("gemm_a8w8_per_token_scale", False, 2)
AiterGemmA8W8PerTokenSplitK3 = _path("gemm_a8w8_per_token_scale", False, 3)
AiterGemmA8W8BlockscaleSplitK2 = _path("gemm_a8w8_blockscale", False, 2)
AiterGemmA8W8BlockscaleSplitK3 = _path("gemm_a8w8_blockscale", False, 3)
AiterGemmAFP4WFP4SplitK2 = _path("gemm_afp4wfp4", False, 2)
AiterGemmAFP4WFP4SplitK4 = _path("gemm_afp4wfp4", False, 4)
AiterGemmA8WFP4SplitK2 = _path("gemm_a8wfp4", False, 2)
AiterGemmA8WFP4SplitK4 = _path("gemm_a8wfp4", False, 4)
SPLITK_PATHS: tuple[type[AiterLinearPath], ...] = (
    AiterGemmA8W8PerTokenSplitK2,
    AiterGemmA8W8PerTokenSplitK3,
    AiterGemmA8W8BlockscaleSplitK2,
    AiterGemmA8W8BlockscaleSplitK3,
    AiterGemmAFP4WFP4SplitK2,
    AiterGemmAFP4WFP4SplitK4,
    AiterGemmA8WFP4SplitK2,
    AiterGemmA8WFP4SplitK4,
)
# docs/ENGINE-FINDINGS.md, "gemm_a8wfp4's default config for a shape depends on the shapes
# run before it": _get_config writes each K's split into a dict shared by the M range and
# lru-caches it. The linear cases' K (128, 256) all get SPLITK_BLOCK_SIZE=256 below M=129, so
# only the call-order case (K=2048, then 384, then 2048 again) shows it; the tails path
# passes its own config and is not affected.
AiterGemmA8WFP4.known_findings = (
    KnownFinding(
        "aiter gemm_a8wfp4 with aiter's own config: _get_config hands every shape of an M "
        "range the same lru-cached dict and writes the shape's SPLITK_BLOCK_SIZE into it, so "
        "K=2048 after K=384 is summed over only part of its 2048 columns "
        "(integrations/aiter/findings/a8wfp4_config_state.py; fixed on main, ROCm/aiter#2169)",
        suites=frozenset({"linear"}),
        cases=frozenset({"call_order"}),
    ),
)

# docs/ENGINE-FINDINGS.md, "aiter: split-K pieces that are not whole BLOCK_SIZE_K blocks"
AiterGemmA8W8PerTokenTails.known_findings = (
    KnownFinding(
        "aiter gemm_a8w8_per_token_scale with NUM_KSPLIT=2 and BLOCK_SIZE_K=64: where "
        "cdiv(K, NUM_KSPLIT) is not a multiple of BLOCK_SIZE_K (K=176: pieces of 88) the "
        "kernel's K masks count whole blocks from the piece start, so sums are wrong "
        "(integrations/aiter/findings/per_token_scale_splitk_tail.py)",
        suites=frozenset({"linear"}),
        when=lambda case: case.problem is not None and -(-case.problem.k // 2) % 64 != 0,
    ),
)


def _pieces_not_whole_blocks(splits: int, block_k: int) -> Callable[[FindingCase], bool]:
    """Cases whose split-K pieces (`splitk_piece`) are not whole BLOCK_SIZE_K blocks as the
    wrapper leaves BLOCK_SIZE_K (`wrapper_block_k`)."""

    def partial(case: FindingCase) -> bool:
        if case.problem is None:
            return False
        piece = splitk_piece(case.problem.k, splits)
        return piece % wrapper_block_k(block_k, piece) != 0

    return partial


# docs/ENGINE-FINDINGS.md, "aiter: split-K pieces that are not whole BLOCK_SIZE_K blocks"
for _split_path in (AiterGemmA8W8PerTokenSplitK2, AiterGemmA8W8PerTokenSplitK3):
    _split_path.known_findings = (
        KnownFinding(
            f"aiter gemm_a8w8_per_token_scale with NUM_KSPLIT={_split_path.ksplit} and "
            f"BLOCK_SIZE_K={SPLITK_BLOCKS['BLOCK_SIZE_K']}: where cdiv(K, NUM_KSPLIT) is not a "
            "multiple of the BLOCK_SIZE_K the wrapper leaves, the kernel's K masks count whole "
            "blocks from the piece start, so sums are wrong "
            "(integrations/aiter/findings/per_token_scale_splitk_tail.py)",
            suites=frozenset({"linear"}),
            when=_pieces_not_whole_blocks(_split_path.ksplit, SPLITK_BLOCKS["BLOCK_SIZE_K"]),
        ),
    )

# docs/ENGINE-FINDINGS.md, "gemm_a8w8_blockscale's split-K pieces overlap where they are not
# whole 128-wide blocks"
for _split_path in (AiterGemmA8W8BlockscaleSplitK2, AiterGemmA8W8BlockscaleSplitK3):
    _split_path.known_findings = (
        KnownFinding(
            f"aiter gemm_a8w8_blockscale with NUM_KSPLIT={_split_path.ksplit}: the wrapper "
            "sets each piece to cdiv(K, NUM_KSPLIT) elements while the kernel steps a piece "
            "by whole 128-wide K blocks and indexes the scales from its start, so where a "
            "piece is not whole blocks (K=384 in 2, K=640 in 2 or 3) pieces overlap, read "
            "past K and take misaligned scales: wrong sums "
            "(integrations/aiter/findings/aiter_blockscale_splitk_partial_blocks.py; "
            "ROCm/aiter#5286, open)",
            suites=frozenset({"linear"}),
            when=_pieces_not_whole_blocks(_split_path.ksplit, FP8_BLOCK),
        ),
    )

# aiter's tuned BLOCK_SIZE_K on gfx950 for every suite shape (NUM_KSPLIT 1 after get_splitk
# where K does not split): the scale loads over-read where it does not divide K rounded up
# to 32 (afp4wfp4_scale_loads_scope.py derives and measures the rule).
_TUNED_AFP4_BLOCK_K = 256


def _afp4_scales_overread(block_k: int) -> Callable[[FindingCase], bool]:
    def over(case: FindingCase) -> bool:
        return case.problem is not None and -(-case.problem.k // 32) * 32 % block_k != 0

    return over


# docs/ENGINE-FINDINGS.md, "`gemm_afp4wfp4` loads its E8M0 scales past K"
AiterGemmAFP4WFP4.known_findings = (
    KnownFinding(
        "aiter gemm_afp4wfp4 loads its E8M0 scales without a K mask: a row's scales are read "
        "up to column cdiv(K, BLOCK_SIZE_K) * BLOCK_SIZE_K / 32, past its cdiv(K, 32) where "
        "BLOCK_SIZE_K does not divide K rounded up to 32 (aiter's tuned BLOCK_SIZE_K=256: K=128 "
        "reads 4 bytes past, K=176 2), multiplied by masked-zero elements; a 0xFF byte there "
        "(NaN) makes the output NaN (integrations/aiter/findings/afp4wfp4_scale_loads_scope.py)",
        suites=frozenset({"linear"}),
        when=_afp4_scales_overread(_TUNED_AFP4_BLOCK_K),
    ),
)

# Measured (docs/ENGINE-FINDINGS.md, gemm_afp4wfp4 sections): with the tail config
# (BLOCK_SIZE_K=128, NUM_KSPLIT=1) at K = 176, identical inputs give different outputs from
# run to run (2 of 8 runs of the stage failed the bound on a bias-bf16 case). At that config
# each row's scale loads reach 2 bytes past its 6 scale columns, the last row's past the
# tensor's end: the likely mechanism, measured but not shown to be the variation's cause.
AiterGemmAFP4WFP4Tails.known_findings = (
    KnownFinding(
        "aiter gemm_afp4wfp4 with the tail config (BLOCK_SIZE_K=128, NUM_KSPLIT=1) at K=176: "
        "outputs vary between runs on identical inputs under Triton's interpreter; the "
        "unmasked scale loads read 2 bytes past each row's 6 scale columns there, the last "
        "row's past the tensor (integrations/aiter/findings/afp4wfp4_scale_loads_scope.py), "
        "the likely cause, not shown to be the variation's",
        suites=frozenset({"linear"}),
        when=_afp4_scales_overread(TAIL_CONFIGS["gemm_afp4wfp4"]["BLOCK_SIZE_K"]),
    ),
)
