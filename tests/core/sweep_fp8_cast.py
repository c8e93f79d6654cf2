"""Exhaustive check, too slow for CI (minutes per format on two cores): the FP8 element
encode by torch's cast (harness.core.fastcodec) gives the integer bit arithmetic's code for
every one of the 2^32 float32 bit patterns, eager and compiled, for every FP8 format and
saturation bound the schemes use.

    python -m tests.core.sweep_fp8_cast

The bit arithmetic is the one tests/core/test_fastcodec.py holds to the float64 reference;
that structured sweep runs on every CI run and covers the cast path too. Exit 1 on any
mismatch, with the first few.
"""

from __future__ import annotations

import sys

import torch

from harness.core import fastcodec
from harness.core.formats import FORMATS

CHUNK = 1 << 26
BOUNDS = {"e4m3fn": (448.0, 240.0), "e5m2": (57344.0,), "e4m3fnuz": (240.0, 224.0)}


def main() -> int:
    cast = torch.compile(fastcodec._encode_by_cast, fullgraph=True, dynamic=False)
    failed = 0
    for name, bounds in BOUNDS.items():
        fmt = FORMATS[name]
        dtype = fmt.to_torch_dtype()
        for bound in bounds:
            enc = fastcodec.encoder(fmt, bound)
            bits_enc = fastcodec._Encoder(**{**enc.__dict__, "native": None})
            bad = 0
            for start in range(0, 1 << 32, CHUNK):
                bits = torch.arange(start, start + CHUNK, dtype=torch.int64)
                x = bits.to(torch.uint32).view(torch.int32).view(torch.float32)
                want = fastcodec.encode_scaled(x, bits_enc)
                for got in (fastcodec._encode_by_cast(x, enc, dtype), cast(x, enc, dtype)):
                    wrong = (got != want).nonzero().flatten()
                    bad += wrong.numel()
                    if wrong.numel():
                        print(
                            f"  {name}@{bound}: x={x[wrong[:4]].tolist()} "
                            f"want={want[wrong[:4]].tolist()} got={got[wrong[:4]].tolist()}"
                        )
            print(f"{name} bound {bound}: {bad} mismatches over 2^32 patterns", flush=True)
            failed += bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
