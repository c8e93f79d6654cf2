"""torchao 0.18 to_mx at the ends of E8M0: Inf blocks get finite scales, and a block whose
scale is 2^-127 is divided by 2^-126. Both were declared conventions; torchao main
changed both to OCP MX's behaviour (pytorch/ao#4725), so they are findings.

Standalone: imports only torch and torchao. Hand-written; the expected values follow from
OCP MX v1.0 section 6.3 (a block holding Inf or NaN gets the NaN scale 0xFF; E8M0 spans
2^-127..2^127) as the comments derive them.

Exit 0: both reproduce; 3: neither does (changed: record the version in FINDINGS.md);
1: something else.
"""

import sys
from importlib.metadata import version

import torch
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor

REPRODUCES, FIXED, OTHER = 0, 3, 1


def scale_and_codes(x: torch.Tensor, mode: ScaleCalculationMode) -> tuple[int, list[int]]:
    mx = MXTensor.to_mx(x, torch.float8_e4m3fn, 32, mode)
    return int(mx.scale.view(torch.uint8).flatten()[0]), mx.qdata.view(torch.uint8)[0].tolist()


def main() -> int:
    print("torchao", version("torchao"), "torch", torch.__version__)
    shown = []
    for mode in (ScaleCalculationMode.FLOOR, ScaleCalculationMode.RCEIL):
        x = torch.zeros(1, 32)
        x[0, 0], x[0, 3] = 1.0, float("inf")
        scale, codes = scale_and_codes(x, mode)
        # OCP MX: a block holding Inf gets the NaN scale 0xFF
        print(f"{mode.name:5} block [1, Inf]: scale byte {scale} (OCP MX: 255), Inf coded {codes[3]:#04x}")
        shown.append(scale != 255)
    # amax 2^-120, e4m3 floor: 2^(-120 - 8) clamps to 2^-127 (code 0); 2^-120 / 2^-127 = 2^7
    # = 128 is e4m3 code 0x70; dividing by 2^-126 instead gives 64 (code 0x68)
    x = torch.zeros(1, 32)
    x[0, 0] = 2.0**-120
    scale, codes = scale_and_codes(x, ScaleCalculationMode.FLOOR)
    print(f"FLOOR block [2^-120]: scale byte {scale} (2^-127), element code {codes[0]:#04x} "
          "(OCP MX: 0x70 = 128; 0x68 = 64 is 2^-120 / 2^-126)")  # fmt: skip
    shown.append(scale == 0 and codes[0] == 0x68)
    if all(shown):
        print("REPRODUCES")
        return REPRODUCES
    if not any(shown):
        print("FIXED: OCP MX's behaviour at both ends")
        return FIXED
    print("OTHER: some reproduce", shown)
    return OTHER


if __name__ == "__main__":
    sys.exit(main())
