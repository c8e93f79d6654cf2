"""Every registered quantizer, on every spec it supports, bit for bit (codes and scales).

Four sets of cases: the weight and activation of every linear golden (scheme x shape); the
MX scale edge-case blocks (every element format x E8M0 mode, each boundary case at every
binade an E8M0 scale reaches); the points where each E8M0 mode's answer changes, one
float32 step either side, at every float32 binade (harness.quantizers.mx_scale_points);
degenerate tensors for every spec whose scales are derived from the tensor (all zero, a
zero tile, one non-zero element, float32 subnormals, a tile at the format's max:
harness.quantizers.degenerate), held to the reference quantizer; and designed tensors for
every spec (harness.core.hard_inputs): float32 values a relative 2^-12 beside ties of the
element format (not bf16 values), float32 block maxima whose bf16 rounding changes the
scale, (E4M3 block scales) blocks whose ideal scale lies in E4M3's subnormal range, and
long rows (K 4160 or 4224) whose amax lies in the last 64 columns, also held to the
reference quantizer. A quantizer is held to
the golden, or, where it declares engine conventions, to the reference quantizer with those
conventions in effect (harness.quantizers.expect). A mismatch names the tiles (or
edge-case blocks) that differ. Known engine findings are matched on each case's fields
(`FindingCase`: suite, scheme, the named case -- a role, ``edge_cases``,
``mx_scale_points`` or ``degenerate`` -- element format and scale mode).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import torch

from harness.core.hard_inputs import (
    binade_crossing,
    near_ties,
    subnormal_block_scales,
    tail_amax,
)
from harness.core.inputs import plant_corners, scaled_normal
from harness.core.quantize import (
    QuantizedTensor,
    calibrate_input_scale,
    quantize,
    scale_from_stored,
    tile_amax,
)
from harness.core.schemes import SCHEMES, QuantSpec, get_scheme, mx_spec
from harness.linear.cases import GOLDEN_ENTRY, LINEAR_SHAPES, golden_inputs, shape_id
from harness.paths.case import Case
from harness.paths.findings import FindingCase, known_finding, matching_findings
from harness.plugin import RecordResult, golden_failures, xfail_known
from harness.quantizers import engine_of, get_quantizer, mx_scale_points, quantizers
from harness.quantizers.base import shape_support
from harness.quantizers.degenerate import DEGENERATE_CASES, degenerate_tensor
from harness.quantizers.expect import (
    code_and_scale_mismatches,
    expectation,
    expected_spec,
    finding_models,
)
from harness.quantizers.mx_edge_cases import (
    MX_ELEMENT_FORMATS,
    MX_MODES,
    edge_blocks,
    golden_blocks,
)
from harness.quantizers.mx_edge_cases import golden_entry as edge_golden_entry
from harness.store.golden_store import GoldenStore

ROLES: dict[str, str] = {"weight": "w", "activation": "x"}  # role -> golden tensor prefix
SHOWN = 12  # mismatching tiles/blocks named in a failure message


def _role_spec(scheme: str, role: str) -> QuantSpec | None:
    s = get_scheme(scheme)
    return s.weight if role == "weight" else s.activation


def _conventions(quantizer: str, spec: QuantSpec) -> list[str]:
    return sorted(expected_spec(get_quantizer(quantizer), spec).conventions)


class QuantizerCase(Case):
    """A quantizer case: its engine and conventions are recorded, and findings are matched
    on the spec's element format and scale rounding."""

    SUITE = "quantizers"
    FINDING_SUITE = "quantizers"
    quantizer: str

    @property
    def spec(self) -> QuantSpec:
        raise NotImplementedError

    @property
    def engine(self) -> str:
        return engine_of(get_quantizer(self.quantizer))

    @property
    def conventions(self) -> list[str]:
        return _conventions(self.quantizer, self.spec)

    def finding_fields(self) -> dict[str, Any]:
        spec = self.spec
        fields = super().finding_fields()
        return {**fields, "element_format": spec.format, "scale_mode": spec.scale_rounding}


@dataclass(frozen=True)
class TensorCase(QuantizerCase):
    ID = ("quantizer", "scheme", "role", "shape")
    RECORD = ("quantizer", "engine", "scheme", "role", "shape", "conventions")
    GOLDEN = GOLDEN_ENTRY

    quantizer: str
    scheme: str
    role: str
    shape: tuple[int, int, int]

    @property
    def spec(self) -> QuantSpec:
        spec = _role_spec(self.scheme, self.role)
        assert spec is not None
        return spec

    @property
    def finding_case_name(self) -> str:
        return self.role


# The golden entry of each family of MX blocks.
EDGE_GOLDEN_ENTRIES: dict[str, Callable[[str], str]] = {
    "mx_edge_cases": edge_golden_entry,
    "mx_scale_points": mx_scale_points.golden_entry,
}


@dataclass(frozen=True)
class EdgeCase(QuantizerCase):
    """One quantizer on a family of MX blocks under one E8M0 mode (no scheme: the blocks
    are one element format under one mode)."""

    ID = ("quantizer", "fmt", "mode")
    RECORD = ("quantizer", "engine", "scheme=blocks_label", "role=finding_case_name", "conventions")

    quantizer: str
    fmt: str
    mode: str
    blocks: str = "mx_edge_cases"  # or "mx_scale_points"

    @property
    def spec(self) -> QuantSpec:
        return mx_spec(self.fmt, self.mode)

    @property
    def blocks_label(self) -> str:
        return f"{self.blocks}/{self.fmt}@{self.mode}"

    @property
    def finding_case_name(self) -> str:
        """The named case findings match: ``edge_cases`` or ``mx_scale_points``."""
        return "edge_cases" if self.blocks == "mx_edge_cases" else self.blocks

    @property
    def golden_entry(self) -> str:
        return EDGE_GOLDEN_ENTRIES[self.blocks](self.fmt)


TENSOR_CASES = [
    TensorCase(q, s, r, shape)
    for q in quantizers()
    for s in SCHEMES
    for r in ROLES
    if _role_spec(s, r) is not None
    for shape in LINEAR_SHAPES
]
EDGE_CASES = [EdgeCase(q, f, m) for q in quantizers() for f in MX_ELEMENT_FORMATS for m in MX_MODES]
POINT_CASES = [
    EdgeCase(q, f, m, "mx_scale_points")
    for q in quantizers()
    for f in MX_ELEMENT_FORMATS
    for m in MX_MODES
]


@dataclass(frozen=True)
class DegenerateCase(QuantizerCase):
    """One quantizer on one spec whose scales come from the tensor (weights, and dynamic
    activations; a static activation scale is given, not derived). Specs shared by several
    schemes run once, under the first scheme that has them."""

    ID = ("quantizer", "scheme", "role")
    RECORD = ("quantizer", "engine", "scheme", "role=role_label", "conventions")
    finding_case_name = "degenerate"  # the named case findings match, and the role's suffix

    quantizer: str
    scheme: str
    role: str

    @property
    def spec(self) -> QuantSpec:
        spec = _role_spec(self.scheme, self.role)
        assert spec is not None
        return spec

    @property
    def role_label(self) -> str:
        return f"{self.role}/{self.finding_case_name}"

    def finding_fields(self) -> dict[str, Any]:
        return {**super().finding_fields(), "id": f"{self.finding_case_name}:{self.id}"}


def _derived_specs() -> list[tuple[str, str]]:
    seen: set[QuantSpec] = set()
    out = []
    for s in SCHEMES:
        for r in ROLES:
            spec = _role_spec(s, r)
            if spec is None or (r == "activation" and not spec.dynamic) or spec in seen:
                continue
            seen.add(spec)
            out.append((s, r))
    return out


DEGENERATE = [DegenerateCase(q, s, r) for q in quantizers() for s, r in _derived_specs()]


def _run(quantizer: str, spec: QuantSpec, x: torch.Tensor, scale: torch.Tensor | None) -> Any:
    q = get_quantizer(quantizer)
    for support in (q.supports(spec), shape_support(q, spec, tuple(x.shape))):
        if not support.ok:
            pytest.skip(support.reason)
    return q.quantize(x, spec, scale)


@dataclass
class Mismatches:
    """Tiles compared, and which differ (in codes, in the scale), by name; and of those,
    the ones no matching finding's rules reproduce (``unexplained``)."""

    tiles: int = 0
    wrong_codes: int = 0
    wrong_scale: int = 0
    names: list[str] | None = None
    unexplained: list[str] = field(default_factory=list)
    explained_by: set[int] = field(default_factory=set)  # indices of models that explain a tile

    def add(
        self,
        actual: QuantizedTensor,
        expected: QuantizedTensor,
        label: Callable[[int, int], str],
        zero_tiles: torch.Tensor | None = None,
        models: list[QuantizedTensor] | None = None,
    ) -> None:
        """``zero_tiles``: tiles whose amax is 0, where any positive finite scale is right
        (every element is 0 whatever it is; the reference picks 1, engines a floor).
        ``models``: what the engine gives under its matching findings' rules
        (`finding_models`); a differing tile equal to one of them is explained."""
        wrong = self._wrong(actual, expected, zero_tiles)
        codes_wrong, scales_wrong = wrong
        self.tiles += int(codes_wrong.numel())
        self.wrong_codes += int(codes_wrong.sum())
        self.wrong_scale += int(scales_wrong.sum())
        differs = codes_wrong | scales_wrong
        self.names = (self.names or []) + [label(r, c) for r, c in differs.nonzero().tolist()]
        if models is not None:
            unexplained = differs.clone()
            for i, model in enumerate(models):
                model_codes, model_scale = self._wrong(actual, model, zero_tiles)
                if bool((differs & ~(model_codes | model_scale)).any()):
                    self.explained_by.add(i)
                unexplained &= model_codes | model_scale
            self.unexplained += [label(r, c) for r, c in unexplained.nonzero().tolist()]

    @staticmethod
    def _wrong(
        actual: QuantizedTensor, expected: QuantizedTensor, zero_tiles: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        codes_wrong, scales_wrong = code_and_scale_mismatches(actual, expected)
        if zero_tiles is not None:
            a = actual.scale.float().cpu()
            scales_wrong &= ~(zero_tiles & torch.isfinite(a) & (a > 0))
        return codes_wrong, scales_wrong


def _models(
    quantizer: str,
    case: FindingCase,
    spec: QuantSpec,
    x: torch.Tensor,
    scale: torch.Tensor | None = None,
) -> list[QuantizedTensor] | None:
    """The engine's expected output under the findings that cover ``case`` (None: no
    finding, or one that covers the whole case)."""
    q = get_quantizer(quantizer)
    return finding_models(q, spec, matching_findings(q, case), x, scale)


def _explaining(q: Any, case: FindingCase, found: Mismatches) -> str | None:
    """The text of the known finding(s) that cover ``case``: with scoped findings, the ones
    whose rules explain a differing tile, joined (all of them when only their union does);
    else the first that matches."""
    findings = matching_findings(q, case)
    if not found.explained_by or not all(f.behaves_as for f in findings):
        return known_finding(q, case)
    singles = sorted(i for i in found.explained_by if i < len(findings))
    chosen = singles or range(len(findings))
    return " + ".join(findings[i].text for i in chosen)


def _check(
    case: FindingCase,
    quantizer: str,
    actual: QuantizedTensor,
    expected: QuantizedTensor,
    label: Callable[[int, int], str],
    record_result: RecordResult,
    models: list[QuantizedTensor] | None = None,
) -> None:
    found = Mismatches()
    found.add(actual, expected, label, models=models)
    _verdict(case, quantizer, found, record_result)


def _verdict(
    case: FindingCase, quantizer: str, found: Mismatches, record_result: RecordResult
) -> None:
    names = found.names or []
    record_result(
        tiles=found.tiles,
        tiles_with_wrong_codes=found.wrong_codes,
        tiles_with_wrong_scale=found.wrong_scale,
        first_mismatches=names[:SHOWN],
    )
    message = (
        f"{len(names)}/{found.tiles} tiles differ ({found.wrong_scale} in the "
        f"scale, {found.wrong_codes} in element codes); first: {', '.join(names[:SHOWN])}"
    )
    finding = _explaining(get_quantizer(quantizer), case, found)
    if finding is not None and names:
        # A finding that names its rules explains only the tiles those rules reproduce:
        # any other difference is a fault of its own, and fails the case.
        assert not found.unexplained, (
            f"{message}; {len(found.unexplained)} of them are not what the known "
            f"finding reproduces: {', '.join(found.unexplained[:SHOWN])}"
        )
        # A documented engine finding (docs/ENGINES.md) that this case reproduces: recorded as
        # xfail with its mismatches, so it is counted and reported but does not fail the stage.
        # Findings can depend on the data (a -0 appears or not), so a case that does not
        # reproduce one passes.
        xfail_known(record_result, finding, message)
    assert not names, message


@pytest.mark.parametrize("case", TENSOR_CASES, ids=lambda c: c.id)
def test_quantizer_on_golden_tensors(
    case: TensorCase, golden_store: GoldenStore, record_result: RecordResult
) -> None:
    spec = case.spec
    with golden_failures():
        data = golden_store.load(case.golden_entry)
    prefix = f"{shape_id(case.shape)}.{ROLES[case.role]}"
    # goldens pin the float inputs by digest; golden_inputs regenerates and checks them
    with golden_failures():
        w, x = golden_inputs(data, case.scheme, case.shape)
    if case.role == "weight":
        x = w
    golden = QuantizedTensor(
        data.tensors[f"{prefix}_codes"],
        scale_from_stored(data.tensors[f"{prefix}_scale"], spec),
        spec,
        data.tensors.get(f"{prefix}_global_scale"),  # two-level formats (NVFP4) only
    )
    # a static activation's calibrated part: its scale, or a two-level format's global scale
    static_part = golden.global_scale if spec.scale_fmt.per_tensor_level else golden.scale
    static = static_part if case.role == "activation" and not spec.dynamic else None
    actual = _run(case.quantizer, spec, x, static)
    expected = expectation(get_quantizer(case.quantizer), spec, x, golden, static)

    def label(r: int, c: int) -> str:
        amax = float(x.float().abs().max()) if expected.scale.numel() == 1 else None
        return f"tile({r},{c})" + ("" if amax is None else f" amax={amax!r}")

    fc = case.finding_case(shape=tuple(x.shape))  # a finding may depend on the tensor's shape
    models = _models(case.quantizer, fc, spec, x, static)
    _check(fc, case.quantizer, actual, expected, label, record_result, models)


@pytest.mark.parametrize("case", EDGE_CASES, ids=lambda c: c.id)
def test_quantizer_on_mx_edge_cases(
    case: EdgeCase, golden_store: GoldenStore, record_result: RecordResult
) -> None:
    spec = case.spec
    with golden_failures():
        data = golden_store.load(case.golden_entry)
        blocks = golden_blocks(data, case.fmt)
    golden = QuantizedTensor(
        data.tensors[f"{case.mode}.element_codes"],
        scale_from_stored(data.tensors[f"{case.mode}.scale_codes"].reshape(-1, 1), spec),
        spec,
    )
    actual = _run(case.quantizer, spec, blocks, None)
    expected = expectation(get_quantizer(case.quantizer), spec, blocks, golden)
    names = edge_blocks(case.fmt).names  # in the order of the blocks `golden_blocks` checked

    def label(r: int, c: int) -> str:
        return f"{names[r]} (amax {float(blocks[r].abs().max())!r})"

    fc = case.finding_case(shape=tuple(blocks.shape))
    models = _models(case.quantizer, fc, spec, blocks)
    _check(fc, case.quantizer, actual, expected, label, record_result, models)


@pytest.mark.parametrize("case", POINT_CASES, ids=lambda c: c.id)
def test_quantizer_on_mx_scale_points(
    case: EdgeCase, golden_store: GoldenStore, record_result: RecordResult
) -> None:
    spec = case.spec
    with golden_failures():
        data = golden_store.load(case.golden_entry)
        blocks = mx_scale_points.golden_blocks(data, case.fmt)
    golden = QuantizedTensor(
        data.tensors[f"{case.mode}.element_codes"],
        scale_from_stored(data.tensors[f"{case.mode}.scale_codes"].reshape(-1, 1), spec),
        spec,
    )
    actual = _run(case.quantizer, spec, blocks, None)
    expected = expectation(get_quantizer(case.quantizer), spec, blocks, golden)
    names = mx_scale_points.point_blocks(case.fmt).names

    def label(r: int, c: int) -> str:
        return f"{names[r]} (amax {float(blocks[r].abs().max())!r})"

    fc = case.finding_case(shape=tuple(blocks.shape))
    models = _models(case.quantizer, fc, spec, blocks)
    _check(fc, case.quantizer, actual, expected, label, record_result, models)


@pytest.mark.parametrize("case", DEGENERATE, ids=lambda c: c.id)
def test_quantizer_on_degenerate_tensors(case: DegenerateCase, record_result: RecordResult) -> None:
    spec = case.spec
    quantizer = get_quantizer(case.quantizer)
    found = Mismatches()
    fc = case.finding_case()
    for name in DEGENERATE_CASES:
        x = degenerate_tensor(name, spec)
        actual = _run(case.quantizer, spec, x, None)
        expected = quantize(x, expected_spec(quantizer, spec))

        def label(r: int, c: int, name: str = name) -> str:
            return f"{name}:tile({r},{c})"

        models = _models(case.quantizer, fc, spec, x)
        found.add(actual, expected, label, tile_amax(x, spec) == 0, models)
    _verdict(fc, case.quantizer, found, record_result)


# ----------------------------------------------------------------- designed tensors
DESIGNED_SHAPE = (8, 256)
LONG_TAIL = 64


def _long_k(spec: QuantSpec) -> int:
    """K >= 4096, no multiple of 256..1024; whole 128-wide tiles where tiles are 128 wide."""
    return 4224 if spec.block[1] == 128 else 4160


def designed_tensors(scheme: str, role: str) -> dict[str, torch.Tensor]:
    """The designed tensors of one spec, by name (float32, seeded by scheme and role)."""
    spec = _role_spec(scheme, role)
    assert spec is not None
    base = f"quantizers/designed/{scheme}/{role}"
    rows, cols = DESIGNED_SHAPE
    x = scaled_normal(f"{base}/x", rows, cols, spec)
    out = {"near_ties": near_ties(x, spec)}
    if not spec.scale_fmt.per_tensor_level:  # two-level scales: the block level is E4M3
        out["bf16_binade"] = binade_crossing(x, spec)
    if spec.scale_fmt.element is not None:  # minifloat block scales (NVFP4's E4M3)
        out["subnormal_block_scales"] = subnormal_block_scales(x, spec)
    long_rows = scaled_normal(f"{base}/long", 4, _long_k(spec), spec)
    out["long_row"] = tail_amax(long_rows, LONG_TAIL)
    return out


def _all_specs() -> list[tuple[str, str]]:
    """One (scheme, role) per distinct spec, static activations included."""
    seen: set[QuantSpec] = set()
    out = []
    for s in sorted(SCHEMES):
        for r in ROLES:
            spec = _role_spec(s, r)
            if spec is None or spec in seen:
                continue
            seen.add(spec)
            out.append((s, r))
    return out


@dataclass(frozen=True)
class DesignedCase(DegenerateCase):
    """One quantizer on the designed tensors of one spec (static ones calibrated on the
    tensor itself)."""

    finding_case_name = "designed"


DESIGNED = [DesignedCase(q, s, r) for q in quantizers() for s, r in _all_specs()]


@pytest.mark.parametrize("case", DESIGNED, ids=lambda c: c.id)
def test_quantizer_on_designed_tensors(case: DesignedCase, record_result: RecordResult) -> None:
    """Codes and scales bit for bit against the reference on inputs that show a float32
    input rounded to bf16, a scale from a bf16 copy, a reduction over part of a row and
    (E4M3 block scales) a floor on the block scale above E4M3's smallest subnormal."""
    spec = case.spec
    quantizer = get_quantizer(case.quantizer)
    found = Mismatches()
    fc = case.finding_case()
    for name, x in designed_tensors(case.scheme, case.role).items():
        static = None if case.role == "weight" or spec.dynamic else calibrate_input_scale(x, spec)
        actual = _run(case.quantizer, spec, x, static)
        expected = quantize(x, expected_spec(quantizer, spec), static)

        def label(r: int, c: int, name: str = name) -> str:
            return f"{name}:tile({r},{c})"

        models = _models(case.quantizer, fc, spec, x, static)
        found.add(actual, expected, label, models=models)
    _verdict(fc, case.quantizer, found, record_result)


# Activation groups sized by the weight's block_k (harness.linear.designs.blocks_variant):
# the block schemes' activation spec in groups of 64, on row counts of 1, 3 and 17 (below
# one row tile, no power of two) and K a whole number of 64-wide groups but not of 128
# (320), so a quantizer that sizes its groups, its scale grid or its row loop by a
# hard-wired 128 or a power of two shows it.
GROUP_WIDTH = 64
GROUP_WIDTH_SHAPES = ((1, 320), (3, 320), (17, 384))
GROUP_WIDTH_SCHEMES = ("fp8_per_block", "fp8_per_block_fnuz", "fp8_per_block_ue8m0")


@dataclass(frozen=True)
class GroupWidthCase(DegenerateCase):
    """One quantizer on a block scheme's activation spec with 1 x `GROUP_WIDTH` groups."""

    ID = ("quantizer", "scheme", "width")
    finding_case_name = "group_width"
    width: int = GROUP_WIDTH

    @property
    def spec(self) -> QuantSpec:
        return replace(super().spec, block=(1, self.width))


GROUP_WIDTHS = [
    GroupWidthCase(q, s, "activation") for q in quantizers() for s in GROUP_WIDTH_SCHEMES
]


@pytest.mark.parametrize("case", GROUP_WIDTHS, ids=lambda c: c.id)
def test_quantizer_group_width(case: GroupWidthCase, record_result: RecordResult) -> None:
    """Codes and scales bit for bit against the reference, groups 64 wide (the weight's
    block_k), every row count of `GROUP_WIDTH_SHAPES`; a shape the quantizer refuses is
    skipped alone (its reason recorded), the case only when it refuses them all."""
    spec = case.spec
    quantizer = get_quantizer(case.quantizer)
    support = quantizer.supports(spec)
    if not support.ok:
        pytest.skip(support.reason)
    found = Mismatches()
    fc = case.finding_case()
    refused = []
    for m, k in GROUP_WIDTH_SHAPES:
        shape_ok = shape_support(quantizer, spec, (m, k))
        if not shape_ok.ok:
            refused.append(shape_ok.reason)
            continue
        base = f"quantizers/group_width/{get_scheme(case.scheme).input_seed_name}/{m}x{k}"
        x = plant_corners(scaled_normal(base, m, k, spec), spec, base)
        actual = quantizer.quantize(x, spec, None)
        expected = quantize(x, expected_spec(quantizer, spec), None)

        def label(r: int, c: int, shape: str = f"{m}x{k}") -> str:
            return f"{shape}:tile({r},{c})"

        found.add(actual, expected, label, models=_models(case.quantizer, fc, spec, x, None))
    if len(refused) == len(GROUP_WIDTH_SHAPES):
        pytest.skip("; ".join(dict.fromkeys(refused)))
    if refused:
        record_result(shapes_refused=refused)
    _verdict(fc, case.quantizer, found, record_result)
