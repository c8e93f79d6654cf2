"""Re-run a failing linear case from its repro bundle and give the suite's verdicts again.

The bundle (`harness.store.repro`) carries the loaded layer's quantized operands (weight
codes and scales, static input scale, bias), the input, the path's output and everything
`harness.linear.checks.expected_output` derived (reference, bound, rounding interval, the
unquantized product, cancellation, roundings). Re-running rebuilds the layer from those
tensors alone (no golden store needed), runs the path on this machine (and `emulated` on
the same operands for a non-reference path) and applies `linear_checks`: the same named
checks, in the same order, as the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from harness.core.checks import CheckResult
from harness.core.formats import get_format
from harness.core.quantize import QuantizedLinear, QuantizedTensor, scale_grid
from harness.core.schemes import Scheme, get_scheme
from harness.linear.cases import OUT_DTYPES
from harness.linear.checks import ExpectedOutput, linear_checks
from harness.linear.paths import get_path, linear_paths
from harness.paths import LinearPath, LinearProblem
from harness.paths.base import is_reference
from harness.platform.info import detect
from harness.store.repro import Bundle, ReproError

EXPECTED_TENSORS = ("reference", "bound", "lo", "hi", "exact")


def linear_bundle_tensors(
    layer: QuantizedLinear, x: torch.Tensor, y: torch.Tensor, expected: ExpectedOutput
) -> dict[str, torch.Tensor]:
    """The tensors a linear repro bundle holds (what `rerun_linear` needs)."""
    tensors = {"x": x, "w_codes": layer.weight.codes, "w_scale": layer.weight.scale, "y": y}
    tensors |= {name: getattr(expected, name) for name in EXPECTED_TENSORS}
    tensors["cancellation_db"] = torch.tensor(expected.cancellation_db, dtype=torch.float64)
    tensors["roundings"] = torch.tensor(expected.roundings)
    if layer.weight.global_scale is not None:  # a two-level (NVFP4) weight's per-tensor level
        tensors["w_global_scale"] = layer.weight.global_scale
    if layer.input_scale is not None:
        tensors["input_scale"] = layer.input_scale
    if layer.bias is not None:
        tensors["bias"] = layer.bias
    return tensors


@dataclass(frozen=True)
class ReproVerdict:
    path: str
    checks: list[CheckResult]
    same_output: bool  # bit-identical to the output recorded in the bundle

    @property
    def ok(self) -> bool:
        return not any(c.failed for c in self.checks)

    def text(self) -> str:
        lines = [f"  {c.name:<18} {c.verdict()}" for c in self.checks]
        same = "identical to" if self.same_output else "differs from"
        verdict = "PASS" if self.ok else "FAIL"
        return "\n".join([f"{verdict}: path {self.path} (output {same} the bundle's)", *lines])


def _installed_path(name: str, chosen: bool) -> LinearPath:
    """The path to re-run: a ``--path`` typo, or a bundle's path that is not installed on
    this machine (a bundle travels; its engine may not), is a `ReproError` naming it."""
    try:
        return get_path(name)
    except KeyError:
        known = ", ".join(sorted(linear_paths()))
        if chosen:
            raise ReproError(f"--path {name!r} is no path here; known: {known}") from None
        raise ReproError(
            f"the bundle's path {name!r} is not installed here (its plugin is on the machine "
            f"that failed); rerun with --path emulated to check the case against the "
            f"reference, or another of: {known}"
        ) from None


def _check_operands(scheme: Scheme, t: dict[str, torch.Tensor]) -> None:
    """Every tensor has the shape and dtype the suite wrote (from x [M, K] and the weight's
    N rows), so a damaged or hand-edited bundle is a `ReproError` naming the tensor, never
    a shape error from inside a path."""
    x, codes = t["x"], t["w_codes"]
    for name, tensor, form in (("x", x, "[M, K]"), ("w_codes", codes, "[N, K]")):
        if tensor.dim() != 2:
            raise ReproError(
                f"linear bundle: {name} is {tuple(tensor.shape)} {tensor.dtype}, expected 2-D "
                f"{form} (a damaged or hand-edited bundle)"
            )
    (m, k), n = x.shape, codes.shape[0]
    wanted: dict[str, tuple[tuple[int, ...], str]] = {
        "x": ((m, k), "float"),
        "w_codes": ((n, k), "uint8"),
        "w_scale": (scale_grid(scheme.weight, (n, k)), "float"),
        "bias": ((n,), "float"),
        "y": ((m, n), "float"),
        **{name: ((m, n), "float") for name in EXPECTED_TENSORS},
        **{name: ((), "number") for name in SCALAR_TENSORS},
    }
    if "input_scale" in t:
        wanted["input_scale"] = ((1, 1), "float")
    if scheme.weight.scale_fmt.per_tensor_level:
        if "w_global_scale" not in t:
            raise ReproError(
                f"linear bundle of {scheme.name} lacks w_global_scale, its weight's per-tensor "
                "scale (bundles from qharness before it was kept); run the case again for a "
                "new bundle"
            )
        wanted["w_global_scale"] = ((1, 1), "float")
    for name, (shape, kind) in wanted.items():
        given = t.get(name)
        if given is None:
            continue
        right_shape = tuple(given.shape) == shape or (shape == () and given.numel() == 1)
        if not right_shape or not _DTYPE_KINDS[kind](given.dtype):
            raise ReproError(
                f"linear bundle: {name} is {tuple(given.shape)} {given.dtype}, expected "
                f"{shape} {kind} for x {(m, k)} and {n} output features (a damaged or "
                "hand-edited bundle)"
            )
    _check_codes(scheme, codes)


def _check_codes(scheme: Scheme, codes: torch.Tensor) -> None:
    """Every weight code is one of its format's (a 4-bit format has 16): a flipped byte or
    a hand-edited code is a `ReproError`, never an index error from inside the decoder."""
    fmt = get_format(scheme.weight.format)
    limit = 1 << fmt.bits
    if codes.numel() and int(codes.max()) >= limit:
        bad = int((codes >= limit).sum())
        raise ReproError(
            f"linear bundle: w_codes holds {bad} code(s) above {limit - 1}, the largest "
            f"{fmt.name} code (a damaged or hand-edited bundle)"
        )


SCALAR_TENSORS = ("cancellation_db", "roundings")
_DTYPE_KINDS: dict[str, Callable[[torch.dtype], bool]] = {
    "float": lambda d: d.is_floating_point,
    "uint8": lambda d: d == torch.uint8,
    "number": lambda d: d != torch.bool and not d.is_complex,
}


def rerun_linear(bundle: Bundle, path_name: str | None = None) -> ReproVerdict:
    case: dict[str, Any] = bundle.meta.get("case") or {}
    t = bundle.tensors
    try:
        scheme = get_scheme(str(case["scheme"]))
        out_dtype = OUT_DTYPES[str(case["out_dtype"])]
        path_name = path_name or str(case["path"])
        _check_operands(scheme, t)
        layer = QuantizedLinear(
            scheme,
            QuantizedTensor(t["w_codes"], t["w_scale"], scheme.weight, t.get("w_global_scale")),
            t.get("input_scale"),
            t.get("bias"),
        )
        expected = ExpectedOutput(
            reference=t["reference"],
            bound=t["bound"],
            lo=t["lo"],
            hi=t["hi"],
            exact=t["exact"],
            cancellation_db=float(t["cancellation_db"]),
            roundings=int(t["roundings"]),
            scheme=scheme,
        )
        x = t["x"]
    except KeyError as exc:
        raise ReproError(f"linear bundle lacks {exc}") from None
    chosen = path_name != str(case.get("path"))
    path = _installed_path(path_name, chosen)
    platform = detect()
    problem = LinearProblem(x.shape[0], t["w_codes"].shape[0], x.shape[1], "bias" in t, out_dtype)
    support = path.supports(scheme, problem, platform)
    if not support.ok:
        flag = f"--path {path_name}" if chosen else f"the bundle's path {path_name!r}"
        raise ReproError(
            f"{flag} cannot run this {scheme.name} case here: {support.reason}; "
            "rerun with --path emulated to check it against the reference"
        )
    device = platform.torch_device
    layer, x = layer.to(device), x.to(device)
    y = path.forward(layer, x, out_dtype).cpu()
    y_emulated = None
    if not is_reference(path):
        y_emulated = get_path("emulated").forward(layer, x, out_dtype).cpu()
    recorded = t.get("y")
    same = recorded is not None and bool(torch.equal(y, recorded))
    return ReproVerdict(path_name, linear_checks(y, y_emulated, expected, path_name), same)
