"""Checks of MX and NVFP4 layers in a compressed-tensors checkpoint's files.

llm-compressor 0.14 writes its FP4 and MX presets in layouts the FP8 loading validators do
not cover: NVFP4 (``nvfp4-pack-quantized``) as ``weight_packed`` (two e2m1 codes per byte,
[N, K/2] uint8), ``weight_scale`` (one e4m3fn scale per 16 elements along K) and a float32
``weight_global_scale`` (and ``input_global_scale`` when activations are quantized), the
element standing for ``code * weight_scale / weight_global_scale``; MXFP4
(``mxfp4-pack-quantized``) as ``weight_packed`` and ``weight_scale`` (E8M0 codes, one per 32
along K); MXFP8 (``mxfp8-quantized``) as ``weight`` (e4m3fn codes) and E8M0 ``weight_scale``; Quark
0.13 writes MXFP4 with the packed codes under ``weight``.
`LAYOUTS` says which, per harness scheme; `mx_layer_checks` holds one module's files to it:

- ``weight_layout``: the codes' dtype and shape ([N, K/2] uint8 packed, or [N, K] e4m3fn);
- ``scale_layout``: one scale per group along K, of the layout's dtype, finite and positive
  (E8M0: not the NaN code 0xFF);
- ``global_scales``: the float32 (1,) global scales the layout has, finite and positive, and
  no input global scale where activations are not quantized;
- ``codes_match_float``: each code is the float weight over its element scale, rounded:
  within half the gap between the two format values around w/s (after saturation at the
  format's largest value) plus the tool's rounding of w/s in bf16 (relative 2^-8).

`mx_fused_checks` runs them on every shard of a fused layer and adds, where the layout has
a global scale (NVFP4), ``fused_global_shared``: the shards' ``weight_global_scale`` are
one float32 value. A fused layer is one GEMM with one global; llm-compressor links the fused
shards' observers for it (`fuse_weight_observers`: "vLLM requires that fused layers ...
share the same global_scale"), and vLLM serves shards whose globals differ under one of
them with their block scales kept (docs/ENGINE-FINDINGS.md), so a checkpoint that does not
share it is served wrong. (Input globals are not compared: every shard quantizes the same
activation, so any one of them quantizes it correctly.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.checks import CheckResult, failed, passed
from harness.core.formats import decode, e8m0_decode, get_format, magnitudes, unpack_fp4

BF16_DIVISION = 2.0**-8  # unit roundoff of bf16: the tool may form w/s in the model dtype
E8M0_NAN = 0xFF


@dataclass(frozen=True)
class PackedLayout:
    """How compressed-tensors stores one scheme's weight."""

    element: str  # harness element format of the codes
    packed: bool  # two 4-bit codes per byte, low nibble first; else one code per byte
    codes: str  # the codes' tensor (``weight_packed`` or ``weight``)
    group: int  # elements per scale along K
    scale: str  # "e4m3fn" (NVFP4, with a global scale) or "e8m0" (MX)
    input_global_scale: bool  # NVFP4 with quantized activations

    @property
    def global_scale(self) -> bool:
        return self.scale == "e4m3fn"


CT = "compressed-tensors"
NVFP4 = PackedLayout("e2m1", True, "weight_packed", 16, "e4m3fn", False)
MXFP4 = PackedLayout("e2m1", True, "weight_packed", 32, "e8m0", False)
# (the config's quant_method, harness scheme) -> the layout of its files
LAYOUTS: dict[tuple[str, str], PackedLayout] = {
    (CT, "w_nvfp4"): NVFP4,
    (CT, "w_nvfp4_a_nvfp4"): PackedLayout("e2m1", True, "weight_packed", 16, "e4m3fn", True),
    (CT, "w_mxfp4"): MXFP4,
    (CT, "w_mxfp4_a_mxfp4"): MXFP4,
    (CT, "w_mxfp8_a_mxfp8"): PackedLayout("e4m3fn", False, "weight", 32, "e8m0", False),
    # Quark 0.13 (real_quantized, pack_method "reorder"): packed codes under ``weight``
    ("quark", "w_mxfp4_a_mxfp4@even"): PackedLayout("e2m1", True, "weight", 32, "e8m0", False),
}
SCALE_DTYPES = {"e4m3fn": torch.float8_e4m3fn, "e8m0": torch.uint8}


def codes_of(tensors: dict[str, torch.Tensor], module: str, layout: PackedLayout) -> torch.Tensor:
    """The weight's element codes as uint8 [N, K] (packed codes unpacked, low nibble first)."""
    stored = tensors[f"{module}.{layout.codes}"]
    return unpack_fp4(stored) if layout.packed else stored.view(torch.uint8)


def element_scales(
    tensors: dict[str, torch.Tensor], module: str, layout: PackedLayout
) -> torch.Tensor:
    """Each group's scale as float64 [N, K/group] (NVFP4: local over global)."""
    stored = tensors[f"{module}.weight_scale"]
    if layout.scale == "e8m0":
        return e8m0_decode(stored).double()
    local = decode(stored.view(torch.uint8), "e4m3fn").double()
    return local / tensors[f"{module}.weight_global_scale"].double().reshape(())


def _layout_checks(
    tensors: dict[str, torch.Tensor], module: str, layout: PackedLayout, n: int, k: int
) -> list[CheckResult]:
    results = []
    name = f"{module}.{layout.codes}"
    want = ((n, k // 2), torch.uint8) if layout.packed else ((n, k), torch.float8_e4m3fn)
    w = tensors.get(name)
    got = None if w is None else (tuple(w.shape), w.dtype)
    results.append(
        passed("weight_layout")
        if got == want
        else failed("weight_layout", f"{name}: {got}, expected {want}")
    )
    s = tensors.get(f"{module}.weight_scale")
    want_s = ((n, k // layout.group), SCALE_DTYPES[layout.scale])
    got_s = None if s is None else (tuple(s.shape), s.dtype)
    if s is None or got_s != want_s:
        results.append(failed("scale_layout", f"weight_scale: {got_s}, expected {want_s}"))
    elif layout.scale == "e8m0" and bool((s.view(torch.uint8) == E8M0_NAN).any()):
        results.append(failed("scale_layout", "weight_scale holds the E8M0 NaN code"))
    elif layout.scale == "e4m3fn" and not bool((decode(s.view(torch.uint8), "e4m3fn") > 0).all()):
        results.append(failed("scale_layout", "weight_scale holds zero, negative or NaN scales"))
    else:
        results.append(passed("scale_layout"))
    problems = []
    for field, wanted in (
        ("weight_global_scale", layout.global_scale),
        ("input_global_scale", layout.input_global_scale),
    ):
        g = tensors.get(f"{module}.{field}")
        if not wanted:
            if g is not None:
                problems.append(f"{field} present but the scheme has none")
            continue
        if g is None or tuple(g.shape) != (1,) or g.dtype != torch.float32:
            problems.append(f"{field}: {None if g is None else (tuple(g.shape), g.dtype)}")
        elif not (bool(torch.isfinite(g).all()) and float(g) > 0):
            problems.append(f"{field} = {float(g)!r}")
    results.append(
        failed("global_scales", "; ".join(problems)) if problems else passed("global_scales")
    )
    return results


def codes_match(
    codes: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, element: str
) -> str | None:
    """None when ``codes`` (uint8 [N, K]) are ``weight`` over its group ``scales`` rounded to
    ``element`` (see the module doc), else where they are not."""
    fmt = get_format(element)
    group = codes.shape[1] // scales.shape[1]
    q = weight.double() / scales.repeat_interleave(group, dim=1)
    target = q.clamp(-fmt.max_finite, fmt.max_finite)
    mags = magnitudes(fmt)
    hi = torch.searchsorted(mags, target.abs()).clamp(max=mags.numel() - 1)
    gap = mags[hi] - mags[(hi - 1).clamp(min=0)]
    bound = gap / 2 + q.abs() * BF16_DIVISION
    got = decode(codes, fmt).double()
    excess = (got - target).abs() - bound
    if bool((excess <= 0).all()):
        return None
    i = int(excess.flatten().argmax())
    return (
        f"{int((excess > 0).sum())}/{excess.numel()} codes off; worst: code "
        f"{float(got.flatten()[i])!r} for w/s {float(q.flatten()[i])!r} within "
        f"{float(bound.flatten()[i]):.4g}"
    )


def mx_layer_checks(
    tensors: dict[str, torch.Tensor], module: str, layout: PackedLayout, weight: torch.Tensor
) -> list[CheckResult]:
    """The module doc's checks of checkpoint module ``module`` (``weight``: its float weight)."""
    n, k = (int(d) for d in weight.shape)
    results = _layout_checks(tensors, module, layout, n, k)
    if any(r.failed for r in results):
        return results
    problem = codes_match(
        codes_of(tensors, module, layout),
        element_scales(tensors, module, layout),
        weight,
        layout.element,
    )
    results.append(failed("codes_match_float", problem) if problem else passed("codes_match_float"))
    return results


def fused_global_check(tensors: dict[str, torch.Tensor], modules: tuple[str, ...]) -> CheckResult:
    """``fused_global_shared``: the fused shards' weight global scales are one float32 value
    (bit for bit; a missing one is left to ``global_scales``)."""
    stored = {
        m: tensors[f"{m}.weight_global_scale"].float().reshape(-1)
        for m in modules
        if f"{m}.weight_global_scale" in tensors
    }
    values = {m: g.view(torch.int32).tolist() for m, g in stored.items()}
    if len({tuple(v) for v in values.values()}) <= 1:
        return passed("fused_global_shared")
    shown = ", ".join(f"{m}: {g.tolist()}" for m, g in stored.items())
    return failed("fused_global_shared", f"fused shards' weight global scales differ ({shown})")


def mx_fused_checks(
    tensors: dict[str, torch.Tensor],
    modules: tuple[str, ...],
    layout: PackedLayout,
    float_tensors: dict[str, torch.Tensor],
) -> list[CheckResult]:
    """`mx_layer_checks` on every shard of a fused layer (q/k/v, gate/up), one result per
    check: failed where any shard fails it, naming the shard; first, where the layout has a
    global scale, ``fused_global_shared`` (module doc)."""
    per_module = {
        m: mx_layer_checks(tensors, m, layout, float_tensors[f"{m}.weight"]) for m in modules
    }
    names = list(dict.fromkeys(r.name for rs in per_module.values() for r in rs))
    out = (
        []
        if len(modules) < 2 or not layout.global_scale
        else [fused_global_check(tensors, modules)]
    )
    for name in names:
        bad = [(m, r) for m, rs in per_module.items() for r in rs if r.name == name and r.failed]
        if bad:
            out.append(failed(name, "; ".join(f"{m}: {r.message}" for m, r in bad[:3])))
        else:
            out.append(passed(name))
    return out
