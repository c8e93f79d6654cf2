"""Invariants of checkpoint loading, as functions that return what is violated.

- every shard of the loaded layer dequantizes to what the checkpoint's shard stands for:
  bit-exactly where no requantization happened (flavour normalization is exact), within one
  ULP of the runtime format where a shard was requantized to a larger scale;
- a fused per-tensor layer holds one weight scale, shared by all shards: the largest
  shard scale (`shared_scale_violations`);
- two loaders give bit-identical runtime tensors, a zero code's sign aside
  (`runtime_differences`);
- the bias is applied exactly once (`bias_application_counts`).

Each check returns a list of human-readable violations (empty: holds), so the suites assert
on them and the order self-test can show that a faulty pipeline is reported.
"""

from __future__ import annotations

import torch

from harness.core.compare import bit_mismatches
from harness.core.formats import decode, get_format, magnitudes
from harness.core.schemes import WHOLE
from harness.loading.checkpoint import LinearCheckpoint
from harness.loading.loaders import LoadedLayer, Loader


def requantized_shards(ckpt: LinearCheckpoint) -> frozenset[int]:
    """Shards a correct loader must requantize: per-tensor shards below the largest scale."""
    if ckpt.scheme.weight.block != (WHOLE, WHOLE) or not ckpt.fused:
        return frozenset()
    scales = {
        i: float(s.weight_scale) for i, s in enumerate(ckpt.shards) if s.weight_scale is not None
    }
    top = max(scales.values())
    return frozenset(i for i, v in scales.items() if v != top and ckpt.shards[i].width)


def one_ulp_violations(
    codes: torch.Tensor, fmt_name: str, exact_values: torch.Tensor, scale: float
) -> int:
    """Elements whose code is not within one grid step of the exact value.

    ``codes`` are the loaded codes (scale ``scale``); ``exact_values`` what the checkpoint
    stands for. One step ("one ULP of the target format") is the gap to the neighbouring
    code on the side of the exact value, so RNE (half a step) plus the float32 rounding of
    the dequantize/divide passes, and a wrong code does not.
    """
    mags = magnitudes(fmt_name)
    q = decode(codes, fmt_name).double().reshape(-1)
    t = (exact_values.double() / scale).reshape(-1)
    idx = torch.searchsorted(mags, q.abs())
    lo = mags[(idx - 1).clamp(min=0)]
    hi = mags[(idx + 1).clamp(max=mags.numel() - 1)]
    same_sign = (torch.sign(q) == torch.sign(t)) | (q == 0) | (t == 0)
    inside = (t.abs() >= lo) & (t.abs() <= hi) & same_sign & torch.isfinite(q)
    return int((~inside).sum())


def shard_violations(ckpt: LinearCheckpoint, loaded: LoadedLayer) -> list[str]:
    """dequantize(loaded) vs dequantize(checkpoint), shard by shard."""
    problems: list[str] = []
    weight = loaded.layer.weight
    values = weight.dequantize()
    requantized = requantized_shards(ckpt)
    start = 0
    for i, shard in enumerate(ckpt.shards):
        rows = slice(start, start + shard.width)
        start += shard.width
        if shard.width == 0:
            continue
        expected = ckpt.dequantize_shard(i)
        got = values[rows]
        label = ckpt.tensor_name(shard, "weight")
        if not bool(torch.isfinite(got).all()):
            problems.append(f"{label}: {int((~torch.isfinite(got)).sum())} non-finite values")
            continue
        if i in requantized:
            scale = float(weight.scale.reshape(-1)[0])
            bad = one_ulp_violations(weight.codes[rows], weight.spec.format, expected, scale)
            if bad:
                problems.append(
                    f"{label}: {bad}/{got.numel()} values more than one {weight.spec.format} "
                    f"ULP from the checkpoint after requantization to scale {scale:.6g}"
                )
        elif n := int((got != expected).sum()):  # exact; +0 == -0 (e4m3fnuz has no -0)
            diff = (got.double() - expected.double()).abs().max().item()
            problems.append(
                f"{label}: {n}/{got.numel()} values differ from the checkpoint, which no "
                f"requantization explains (max abs diff {diff:.6g})"
            )
    return problems


def code_value_ratio(stored: str, runtime: str) -> float:
    """Value of an FP8 code in ``stored`` over its value in ``runtime`` (1, or 2 between the
    e4m3fn and e4m3fnuz flavours): what a flavour conversion multiplies the scale by."""
    probe = torch.tensor([0x40], dtype=torch.uint8)
    return float(decode(probe, stored)[0]) / float(decode(probe, runtime)[0])


def shared_scale_violations(ckpt: LinearCheckpoint, loaded: LoadedLayer) -> list[str]:
    """A fused per-tensor layer holds one weight scale, shared by every shard: the largest
    shard scale (in the runtime flavour).

    Kernels read one per-tensor scale, so a loader that keeps each shard's own scale, or
    takes another shard's, serves shards at the wrong magnitude; a larger one than the
    largest loses bits in every shard for nothing. A layer fused on disk stores one scale,
    which every logical shard must hold. Other granularities keep their scales per shard:
    nothing to share.
    """
    if ckpt.scheme.weight.block != (WHOLE, WHOLE) or len(ckpt.logical_shards) < 2:
        return []
    held = loaded.layer.weight.scale.reshape(-1).double()
    distinct = torch.unique(held)
    if distinct.numel() != 1:
        values = ", ".join(f"{float(v):.6g}" for v in distinct[:4])
        return [
            f"fused per-tensor weight scale is not shared: {distinct.numel()} distinct values "
            f"({values}) across {len(ckpt.logical_shards)} shards"
        ]
    ratio = code_value_ratio(ckpt.scheme.weight.format, loaded.layer.weight.spec.format)
    shard_scales = [float(s.weight_scale) for s in ckpt.shards if s.weight_scale is not None]
    shared, top = float(distinct[0]), max(shard_scales) * ratio  # ratio: a power of two, exact
    if shared != top:  # NaN fails too
        return [
            f"shared weight scale {shared:.6g} is not the largest shard scale {top:.6g} "
            f"(in {loaded.layer.weight.spec.format})"
        ]
    return []


def runtime_differences(a: LoadedLayer, b: LoadedLayer) -> list[str]:
    """Where two loaded layers differ, bit for bit (codes, scales, bias, runtime formats)."""
    la, lb = a.layer, b.layer
    problems: list[str] = []
    if la.scheme != lb.scheme:
        problems.append(f"runtime schemes differ: {la.scheme} vs {lb.scheme}")
    if (
        la.weight.spec.format == lb.weight.spec.format
        and la.weight.codes.shape == lb.weight.codes.shape
    ):
        if n := code_mismatches(la.weight.codes, lb.weight.codes, la.weight.spec.format):
            problems.append(f"weight codes: {n}/{la.weight.codes.numel()} elements differ bit-wise")
    else:
        problems.append(
            f"weight codes: {tuple(la.weight.codes.shape)} {la.weight.spec.format} vs "
            f"{tuple(lb.weight.codes.shape)} {lb.weight.spec.format}"
        )
    pairs = {
        "weight scale": (la.weight.scale, lb.weight.scale),
        "input scale": (la.input_scale, lb.input_scale),
        "bias": (la.bias, lb.bias),
    }
    for name, (x, y) in pairs.items():
        if x is None or y is None:
            if (x is None) != (y is None):
                problems.append(f"{name}: present in one layer only")
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            problems.append(f"{name}: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}")
        elif n := bit_mismatches(x, y):
            problems.append(f"{name}: {n}/{x.numel()} elements differ bit-wise")
    return problems


def code_mismatches(a: torch.Tensor, b: torch.Tensor, fmt_name: str) -> int:
    """Codes that differ bit-wise, counting +0 and -0 as one code where the format has both.

    The sign of a zero code depends on the order of two correct steps: requantizing a
    tiny negative value in e4m3fn gives -0, in e4m3fnuz (which has no -0) +0, so a loader
    that converts the flavour first and one that requantizes first may differ there and
    nowhere else. Both codes decode to zero, so every product and sum is the same. 0x80 of
    a format where it is not a zero (e4m3fnuz: NaN) still counts.
    """
    differ = a != b
    fmt = get_format(fmt_name)
    if fmt.has_negative_zero:
        zero = ((a == 0) | (a == fmt.sign_bit)) & ((b == 0) | (b == fmt.sign_bit))
        differ &= ~zero
    return int(differ.sum())


def check_loader(
    loader: Loader, ckpt: LinearCheckpoint, target_format: str, reference: Loader | None
) -> list[str]:
    """Every loading invariant for one checkpoint; a loader that raises is a violation."""
    try:
        loaded = loader.load(ckpt, target_format)
    except Exception as exc:  # a valid checkpoint must load: an exception is a finding
        return [f"loader {loader.name} raised {type(exc).__name__}: {exc}"]
    problems = [f"{loader.name}: {p}" for p in shard_violations(ckpt, loaded)]
    problems += [f"{loader.name}: {p}" for p in shared_scale_violations(ckpt, loaded)]
    if reference is not None:
        other = reference.load(ckpt, target_format)
        problems += [
            f"{loader.name} vs {reference.name}: {p}" for p in runtime_differences(loaded, other)
        ]
    return problems


AMBIGUOUS = -2  # bias_application_counts: the bias cannot be told apart at this output


def bias_application_counts(
    y: torch.Tensor,
    y_without_bias: torch.Tensor,
    bias: torch.Tensor,
    bound: torch.Tensor,
    allow_ambiguous: bool = False,
) -> torch.Tensor:
    """How many times each output got ``bias``: n with |y - y0 - n*bias| <= bound, else -1.

    Unambiguous where |bias| > 2*bound: the bands around 0, 1 and 2 applications are then
    disjoint. The cases choose the bias so against the golden product; a path whose declared
    conventions move its product far from the golden's (a cancelling sum quantized another
    way) can leave outputs where it is not. There the count is `AMBIGUOUS` with
    ``allow_ambiguous``, and an error without it.
    """
    b = bias.double().reshape(1, -1).expand_as(y)
    bnd = bound.double()
    small = b.abs() <= 2 * bnd
    if bool(small.any()) and not allow_ambiguous:
        at = tuple(int(i) for i in small.nonzero()[0])
        raise ValueError(
            f"bias too small for its error bound in {int(small.sum())}/{small.numel()} outputs "
            f"(first at {list(at)}: |bias| {float(b[at].abs()):.6g}, bound "
            f"{float(bnd[at]):.6g}): application counts are ambiguous"
        )
    diff = y.double() - y_without_bias.double()
    n = torch.round(diff / b)
    fits = (diff - n * b).abs() <= bnd
    counts = torch.where(fits, n, torch.full_like(n, -1)).long()
    return torch.where(small, AMBIGUOUS, counts)
