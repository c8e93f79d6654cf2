"""Standalone repro scripts for quantizer findings: the engine, torch and numpy, nothing else.

`standalone_script` writes a Python script that builds the smallest input of a finding
(its float32 values embedded as bit patterns, so nothing is lost in printing), calls the
engine through a snippet that returns ``(scale, dequantized)`` (float32 scale per tile,
the engine's values times its scale), and compares them with the expected ones, which the
harness computes here with its reference quantizer (under the quantizer's declared
conventions) and embeds as bit patterns too. The script prints the input, the expected and
actual values and the reason the expected value is right, and exits with a status a test
can read: `REPRODUCES` (0), `FIXED` (3: the engine now returns the expected values),
`NOT_HERE` (4: the snippet says this machine cannot run it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.formats import decode
from harness.core.quantize import expand_scale, quantize, tile_amax
from harness.core.spec import QuantSpec

REPRODUCES, FIXED, NOT_HERE = 0, 3, 4


@dataclass(frozen=True)
class EngineCall:
    """How a standalone script calls the engine: ``imports`` (module level) and ``body``,
    the body of ``def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]``
    (indented four spaces) returning the float32 scale per tile and the dequantized
    float32 tensor."""

    package: str  # the distribution whose version the script prints
    imports: str
    body: str


def _bits(t: torch.Tensor) -> list[int]:
    """float32 bit patterns as unsigned ints (numpy reads them back as uint32)."""
    signed = t.float().contiguous().view(torch.int32).flatten().tolist()
    return [int(v) & 0xFFFFFFFF for v in signed]


def expected_of(x: torch.Tensor, spec: QuantSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale per tile, dequantized) by the reference quantizer, float32."""
    q = quantize(x.float(), spec, reference=True)
    full = expand_scale(q.scale.float(), spec, x.shape)
    return q.scale.float(), decode(q.codes, spec.format).float() * full


SCRIPT = '''"""{title}

Standalone: imports only {package}, torch and numpy. Written by the qharness findings
repro generator (scripts/findings_repro.py); expected values come from the qharness
reference quantizer and are embedded below as float32 bit patterns.

Why the expected value is right:
{reason}
"""

import sys
from importlib.metadata import version

import numpy as np
import torch
{imports}

X_BITS = {x_bits}
SHAPE = {shape}
EXPECTED_SCALE_BITS = {scale_bits}
EXPECTED_VALUE_BITS = {value_bits}
ZERO_TILES = {zero_tiles}  # tiles of zeros: any positive finite scale is right for them


def f32(bits):
    return torch.tensor(np.array(bits, dtype=np.uint32).view(np.float32))


def engine(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
{body}


def same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Equal values (-0 and +0 apart), NaN equal to NaN."""
    a, b = a.float().flatten(), b.float().flatten()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return both_nan | ((a == b) & (torch.signbit(a) == torch.signbit(b)))


def main() -> int:
    print("{package}", version("{package}"), "torch", torch.__version__)
    x = f32(X_BITS).reshape(SHAPE)
    want_scale = f32(EXPECTED_SCALE_BITS)
    want = f32(EXPECTED_VALUE_BITS).reshape(SHAPE)
    got_scale, got = engine(x)
    got_scale = got_scale.float().flatten()
    ok_scale = same(got_scale, want_scale)
    for i in ZERO_TILES:
        ok_scale[i] = bool(torch.isfinite(got_scale[i])) and bool(got_scale[i] > 0)
    ok = same(got, want).reshape(SHAPE)
    for i in (~ok_scale).nonzero().flatten().tolist()[:4]:
        want_i, got_i = want_scale[i].item(), got_scale[i].item()
        print(f"scale[{{i}}]: expected {{want_i!r}}, actual {{got_i!r}}")
    for r, c in (~ok).nonzero().tolist()[:6]:
        print(
            f"x[{{r}},{{c}}] = {{x[r, c].item()!r}}: dequantized expected "
            f"{{want[r, c].item()!r}}, actual {{got[r, c].item()!r}}"
        )
    if bool(ok_scale.all()) and bool(ok.all()):
        print("FIXED: the engine returns the expected scales and values")
        return {fixed}
    print("REPRODUCES")
    return {reproduces}


if __name__ == "__main__":
    sys.exit(main())
'''


def standalone_script(
    title: str, reason: str, call: EngineCall, x: torch.Tensor, spec: QuantSpec
) -> str:
    """The text of a standalone repro of ``call`` on ``x`` against the reference under
    ``spec`` (give the quantizer's convention-adjusted spec)."""
    scale, values = expected_of(x, spec)
    body = call.body.rstrip("\n")
    return SCRIPT.format(
        title=title,
        package=call.package,
        reason="\n".join(reason.strip().splitlines()),
        imports=call.imports.rstrip("\n"),
        x_bits=_bits(x),
        shape=tuple(x.shape),
        scale_bits=_bits(scale),
        value_bits=_bits(values),
        zero_tiles=(tile_amax(x.float(), spec) == 0).flatten().nonzero().flatten().tolist(),
        body=body,
        fixed=FIXED,
        reproduces=REPRODUCES,
    )
