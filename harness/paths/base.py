"""The execution model shared by linear and MoE paths.

One vocabulary for both:

- `Support`: whether a path or kernel can run something here, and if not, why (the reason
  becomes the counted skip reason).
- `Numerics`: how a path or kernel rounds on the way to its output (operand dtype,
  accumulation dtype, epilogue roundings, roundings to the output dtype); the suites
  derive their error bounds from this declaration and nothing else.
- `PathBase` (and `LinearPathBase`): the defaults every built-in path inherits:
  ``is_reference``, ``uses_capabilities``, ``kernel_name``, ``conventions``,
  ``runs_kernel_source`` and, for linear paths, the numerics of a path that rounds once.
- `LinearPath`: the runtime protocol a linear path satisfies (``name``, ``supports``,
  ``forward``); MoE's is `harness.moe.paths.base.MoEPath`.
- `KernelContract`: what a native kernel states it can run (``accepts``, from QuantSpec
  fields, never from names) and which capability probe gates it. Linear kernel modes and
  grouped MoE kernels implement it; `harness.paths.dispatch` checks tables against it.
- `OperandContract`: the common shape of such a statement (formats, scale format, tiles).

Plugins from entry points need not inherit `PathBase`: an object with ``name``,
``supports`` and ``forward`` is a valid linear path. The helpers at the end of this
module (`is_reference`, `path_conventions`, `activation_in_model_dtype`,
`memory_not_judged`, `uses_capabilities`, `kernel_name`, `runs_kernel_source`,
`linear_numerics`) read the optional members with `PathBase`'s defaults; they are the one
place that does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import torch

from harness.core.conventions import with_conventions
from harness.core.quantize import QuantizedLinear, quantize_activation
from harness.core.schemes import Scheme
from harness.core.spec import Block, QuantSpec, granularity
from harness.platform.info import PlatformInfo


@dataclass(frozen=True)
class LinearProblem:
    """The shape and options of one linear call: y[M, N] = x[M, K] @ W[N, K]^T (+ bias)."""

    m: int
    n: int
    k: int
    bias: bool
    out_dtype: torch.dtype


@dataclass(frozen=True)
class Support:
    """Whether a path can run a problem, and if not, why (shown as the skip reason)."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Support:
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Support:
        return cls(False, reason)


# ------------------------------------------------------------------------- numerics
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).split(".")[-1]


OVERFLOW_RULES = ("ieee", "saturate")
# How each rounding to the output dtype rounds: to nearest even (IEEE's default, the
# reference), or toward zero (dropping the low bits: Triton's interpreter converts float32
# to bfloat16 so, docs/ENGINES-ADAPTERS.md). Both are monotone, so the rounding interval
# holds for either; toward zero errs by up to one ULP instead of half of one.
ROUNDING_MODES = ("nearest", "toward_zero")


@dataclass(frozen=True)
class Numerics:
    """How a path (or kernel) rounds between exact operands and its output.

    The bounds follow from this declaration alone (harness.core.compare for linear,
    harness.moe.bounds for MoE). A path that rounds its product to the output dtype and
    then adds the bias in float32 and rounds again declares ``output_roundings=2``: the
    bound widens and the bit-exact interval check (one rounding) no longer applies.
    """

    out_dtype: torch.dtype  # the dtype the result is rounded to
    output_roundings: int = 1  # roundings to out_dtype (none when it is float32 itself)
    accumulation_dtype: torch.dtype = torch.float32  # dtype of the K-term sum
    operand_dtype: torch.dtype | None = None  # operands rounded to this first; None: exact
    epilogue_roundings: int = 0  # accumulation-dtype roundings after the sum (scale multiplies)
    activation_dtype: torch.dtype = torch.float32  # MoE: dtype of SiLU-and-mul between GEMMs
    # Of the output roundings, those applied to the product before the bias is added (a
    # kernel that returns the GEMM in the output dtype, then adds the bias there): their
    # error scales with |product|, not with the smaller |product + bias| where they cancel.
    roundings_before_bias: int = 0
    # linear: float32 roundings each term's operands pass through beyond the two that
    # applying their scales takes (harness.paths.bounds), e.g. a stored reciprocal scale
    # inverted on load, or a second operand's own scale multiplies
    extra_term_roundings: int = 0
    # A result beyond the output dtype's largest finite value: "ieee" (round to nearest:
    # +-Inf from max + half an ULP up, what the reference and a plain cast do) or
    # "saturate" (+-max, as some engines' epilogues do); docs/SCHEMES.md#output-overflow.
    overflow: str = "ieee"
    # linear: None where the kernel multiplies the scheme's quantized activation; a dtype
    # where it multiplies the activation as it receives it, in that dtype, instead: a
    # weight-only (W8A16) kernel an engine selects for a W8A8 checkpoint on purpose and
    # documents. The reference is then that activation times the dequantized weight.
    unquantized_activation: torch.dtype | None = None
    # How each output rounding rounds (`ROUNDING_MODES`): a kernel whose conversion
    # truncates declares "toward_zero", keeping the bit-exact interval check (the
    # interval's ends are rounded the same way) and doubling each rounding's bound.
    rounding_mode: str = "nearest"

    @property
    def activation_quantized(self) -> bool:
        return self.unquantized_activation is None

    @property
    def rounding_units(self) -> int:
        """One output rounding's error in units of the output dtype's unit roundoff u
        (half an ULP): 1 to nearest, 2 toward zero."""
        return 2 if self.rounding_mode == "toward_zero" else 1

    def __post_init__(self) -> None:
        if not 0 <= self.roundings_before_bias <= self.output_roundings:
            raise ValueError(
                f"roundings_before_bias={self.roundings_before_bias} must lie in "
                f"[0, output_roundings={self.output_roundings}]"
            )
        if self.overflow not in OVERFLOW_RULES:
            raise ValueError(f"overflow {self.overflow!r}: one of {OVERFLOW_RULES}")
        if self.rounding_mode not in ROUNDING_MODES:
            raise ValueError(f"rounding_mode {self.rounding_mode!r}: one of {ROUNDING_MODES}")
        for name in ("out_dtype", "accumulation_dtype", "activation_dtype"):
            if not isinstance(getattr(self, name), torch.dtype):
                raise TypeError(f"Numerics.{name}={getattr(self, name)!r}: a torch.dtype")
        for name in ("operand_dtype", "unquantized_activation"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, torch.dtype):
                raise TypeError(f"Numerics.{name}={value!r}: a torch.dtype or None")

    def round_operand(self, values: torch.Tensor) -> torch.Tensor:
        """Operand values as the kernel multiplies them (float32)."""
        if self.operand_dtype is None:
            return values.float()
        return values.to(self.operand_dtype).float()

    def round_output(self, values: torch.Tensor) -> torch.Tensor:
        """The kernel's final rounding of its float32 result (as ``rounding_mode`` says;
        past the output dtype's range as ``overflow`` says)."""
        values = values.float()
        if self.overflow == "saturate" and self.out_dtype != torch.float32:
            top = torch.finfo(self.out_dtype).max
            values = values.clamp(-top, top)  # NaN stays NaN
        rounded = values.to(self.out_dtype)
        if self.rounding_mode == "toward_zero" and self.out_dtype != torch.float32:
            # where nearest rounded away from zero, the next value toward zero (a finite
            # value past the range truncates to max; Inf and NaN stay)
            away = rounded.float().abs() > values.abs()
            rounded = torch.where(
                away, torch.nextafter(rounded, torch.zeros_like(rounded)), rounded
            )
        return rounded.float()

    def describe(self) -> str:
        op = "exact" if self.operand_dtype is None else _dtype_name(self.operand_dtype)
        acc = (
            "fp32"
            if self.accumulation_dtype == torch.float32
            else _dtype_name(self.accumulation_dtype)
        )
        out = _dtype_name(self.out_dtype)
        act = _dtype_name(self.activation_dtype)
        saturating = ", saturating" if self.overflow == "saturate" else ""
        if self.rounding_mode != "nearest":
            saturating += f", rounding {self.rounding_mode.replace('_', ' ')}"
        weight_only = (
            ""
            if self.unquantized_activation is None
            else f", activation unquantized in {_dtype_name(self.unquantized_activation)}"
        )
        return f"operands {op}{weight_only}, {acc} accumulate, out {out}{saturating}, SiLU in {act}"


EXACT_FP32 = Numerics(out_dtype=torch.float32)  # exact operands, float32 sum and output


# ---------------------------------------------------------------------------- paths
class PathBase:
    """Defaults shared by linear and MoE paths; built-ins inherit them, plugins may.

    Subclasses set ``name`` (unique; it appears in test ids) and implement the protocol
    of their kind (`LinearPath` or `harness.moe.paths.base.MoEPath`).
    """

    name: str
    is_reference: bool = False  # True: the model every other path is compared with
    conventions: frozenset[str] = frozenset()  # engine conventions of its activation quantizer
    # True: it calls GPU kernel source (Triton), which a simulated platform interprets;
    # False: plain torch/CPU code there (harness.paths.execution)
    runs_kernel_source: bool = False

    @property
    def uses_capabilities(self) -> frozenset[str]:
        """Capability probes this path dispatches to (the platform suite reports unused ones)."""
        return frozenset()

    def kernel_name(self, scheme: Scheme, platform: PlatformInfo) -> str:
        """What runs for ``scheme`` here, recorded with each result; by default the name."""
        return self.name


class LinearPathBase(PathBase):
    """`PathBase` plus the linear default numerics: exact operands, one rounding."""

    def numerics(self, scheme: Scheme, problem: LinearProblem) -> Numerics:
        """How this path rounds ``problem``; override when it rounds more than once."""
        return Numerics(out_dtype=problem.out_dtype)


@runtime_checkable
class LinearPath(Protocol):
    """What a path provides. Register built-ins in harness.paths, others by entry point."""

    name: str

    def supports(self, scheme: Scheme, problem: LinearProblem, platform: PlatformInfo) -> Support:
        """Say whether this path can run the problem here; the reason is reported."""
        ...

    def forward(
        self, layer: QuantizedLinear, x: torch.Tensor, out_dtype: torch.dtype
    ) -> torch.Tensor:
        """Compute x @ W^T + bias in ``out_dtype`` from the loaded (quantized) layer."""
        ...


# -------------------------------------------------------------------------- kernels
@runtime_checkable
class KernelContract(Protocol):
    """A native kernel's own statement of what it runs, which dispatch tables are checked
    against (harness.paths.dispatch) and native paths consult before every call."""

    @property
    def name(self) -> str:
        """The kernel's name: the decision that names it in a dispatch table."""
        ...

    def accepts(self, scheme: Scheme) -> Support:
        """Whether the kernel's contract covers the scheme (from QuantSpec fields), and why not."""
        ...

    def capability(self, scheme: Scheme) -> str:
        """The capability probe (harness.platform.capabilities) that gates it on a platform."""
        ...


@dataclass(frozen=True)
class OperandContract:
    """What a kernel takes on its two operands, read from QuantSpec fields (never names)."""

    formats: frozenset[str]  # element formats it multiplies
    scale_format: str  # a harness.core.scale_formats.SCALE_FORMATS key
    weight_blocks: frozenset[Block]  # tile shapes of weight scales it takes
    activation_blocks: frozenset[Block]  # tile shapes of activation scales it takes

    def _spec_problem(self, spec: QuantSpec | None, role: str, blocks: frozenset[Block]) -> str:
        if spec is None:
            return f"{role} is not quantized; the kernel takes quantized operands on both sides"
        if spec.format not in self.formats:
            return f"{role} format {spec.format} is not one of {sorted(self.formats)}"
        if spec.scale_format != self.scale_format:
            return (
                f"{role} scales are {spec.scale_format}, the kernel takes "
                f"{self.scale_format} scales"
            )
        if spec.block not in blocks:
            takes = " or ".join(sorted(granularity(b) for b in blocks))
            return f"{role} scales are {spec.granularity}; the kernel takes {takes}"
        return ""

    def check(self, scheme: Scheme) -> Support:
        """Support.yes() when both operands fit, else the first reason they do not."""
        for spec, role, blocks in (
            (scheme.weight, "weight", self.weight_blocks),
            (scheme.activation, "activation", self.activation_blocks),
        ):
            problem = self._spec_problem(spec, role, blocks)
            if problem:
                return Support.no(problem)
        act = scheme.activation
        if act is not None and act.format != scheme.weight.format:
            return Support.no(
                f"weight and activation element formats differ ({scheme.weight.format} x "
                f"{act.format}); the kernel takes one format on both operands"
            )
        return Support.yes()


# ------------------------------------------- optional members, for paths of any kind
def is_reference(path: object) -> bool:
    """True for a path that is itself a reference model, so the suites do not compare it
    with ``emulated`` (default False).

    Only an ``is_reference`` declared by the path's own class (or set on the instance)
    counts, never one inherited: a plugin that subclasses the emulated path (or `PathBase`)
    to reuse its code is still a path under test and is compared with ``emulated``.
    """
    own = getattr(path, "__dict__", {})
    declared = own.get("is_reference", type(path).__dict__.get("is_reference", False))
    return bool(declared)


def path_conventions(path: object) -> frozenset[str]:
    """Engine conventions (harness.core.conventions) the path quantizes activations with
    (default none): the suites then expect the activation the reference quantizer computes
    under them, as they do for a quantizer that declares them."""
    return frozenset(getattr(path, "conventions", frozenset()))


def with_activation_conventions(scheme: Scheme, conventions: frozenset[str]) -> Scheme:
    """``scheme`` whose activation spec carries those of ``conventions`` that apply to it."""
    if scheme.activation is None or not conventions:
        return scheme
    return replace(scheme, activation=with_conventions(scheme.activation, conventions))


def scheme_as_multiplied(
    scheme: Scheme, conventions: frozenset[str], numerics: Numerics | None = None
) -> Scheme:
    """The scheme whose operands a path multiplies: its activation quantized under the
    path's ``conventions``, or no activation quantization where its ``numerics`` declare
    that the kernel takes the activation as it receives it (``activation_quantized``)."""
    if numerics is not None and not numerics.activation_quantized:
        return scheme if scheme.activation is None else replace(scheme, activation=None)
    return with_activation_conventions(scheme, conventions)


def multiplied_activation(
    x: torch.Tensor,
    scheme: Scheme,
    input_scale: torch.Tensor | None,
    conventions: frozenset[str] = frozenset(),
    numerics: Numerics | None = None,
) -> torch.Tensor:
    """The activation (float64) a path declaring ``conventions`` and ``numerics``
    multiplies: the reference quantizer's under those conventions (`scheme_as_multiplied`),
    x itself for a scheme without activation quantization, or x in the declared dtype for a
    weight-only kernel (``Numerics.unquantized_activation``)."""
    if numerics is not None and numerics.unquantized_activation is not None:
        return x.to(numerics.unquantized_activation).double()
    scheme = scheme_as_multiplied(scheme, conventions, numerics)
    xq = quantize_activation(x, scheme, input_scale)
    return x.double() if xq is None else xq.dequantize(torch.float64)


def layer_under_conventions(
    layer: QuantizedLinear, conventions: frozenset[str], numerics: Numerics | None = None
) -> QuantizedLinear:
    """The same loaded layer, its activations quantized as the path declares (under
    ``conventions``, or not at all: `scheme_as_multiplied`): what `emulated` runs when
    compared with that path."""
    scheme = scheme_as_multiplied(layer.scheme, conventions, numerics)
    return layer if scheme is layer.scheme else replace(layer, scheme=scheme)


def activation_in_model_dtype(path: object) -> str:
    """Why the path hands its engine the activation in the model (output) dtype, as the
    engine's own layers receive it, or "" (default): the path takes float32 values as they
    are. The float32-activation suite skips such a path with this reason, since rounding to
    the model dtype happens before the engine's layer and is then not the path's to check."""
    return str(getattr(path, "activation_in_model_dtype", ""))


def memory_not_judged(path: object) -> str:
    """Why the memory suite does not judge this path's forward, or "" (default: it is held
    to its budget). A path that dequantizes the weight while its numerics come first says
    so here; each of its memory cases is then a counted skip with this reason, never a
    pass."""
    return str(getattr(path, "memory_not_judged", "") or "")


def uses_capabilities(path: object) -> frozenset[str]:
    """The capability probes a path says it dispatches to (default none)."""
    return frozenset(getattr(path, "uses_capabilities", frozenset()))


def runs_kernel_source(path: object) -> bool:
    """True for a path that declares ``runs_kernel_source`` (default False): what it calls
    is GPU kernel source, which a simulated platform interprets (harness.paths.execution)."""
    return bool(getattr(path, "runs_kernel_source", False))


def kernel_name(path: object, scheme: Scheme, platform: PlatformInfo) -> str:
    """What runs for ``scheme`` on ``platform`` (default: the path's name)."""
    method = getattr(path, "kernel_name", None)
    return str(getattr(path, "name")) if method is None else str(method(scheme, platform))  # noqa: B009


def linear_numerics(path: LinearPath, scheme: Scheme, problem: LinearProblem) -> Numerics:
    """A linear path's declared numerics.

    Paths declare ``numerics(scheme, problem)``; a plugin written before that may declare
    ``output_roundings(scheme, problem) -> int`` instead; a path that declares neither
    rounds once (`LinearPathBase.numerics`).
    """
    method = getattr(path, "numerics", None)
    if method is not None:
        numerics = method(scheme, problem)
        if not isinstance(numerics, Numerics):
            raise TypeError(f"path {path.name!r}: numerics() returned {numerics!r}, not Numerics")
        return numerics
    legacy = getattr(path, "output_roundings", None)
    roundings = 1 if legacy is None else int(legacy(scheme, problem))
    return Numerics(out_dtype=problem.out_dtype, output_roundings=roundings)


def output_roundings(path: LinearPath, scheme: Scheme, problem: LinearProblem) -> int:
    """How many times ``path`` rounds to the output dtype (see `linear_numerics`)."""
    return linear_numerics(path, scheme, problem).output_roundings


def takes_leading_dims(path: object) -> bool:
    """Whether the path takes an activation with leading dimensions ([batch, seq, hidden]),
    as its engine's linear layers do (``takes_leading_dims = True``); default False: the
    path's kernel API takes [tokens, hidden] only, and the batched call case skips it with
    that reason."""
    return bool(getattr(path, "takes_leading_dims", False))
