#!/usr/bin/env python3
"""Write the standalone repro scripts of the quantizer findings beside their write-ups.

    python scripts/findings_repro.py          # (re)write integrations/<engine>/findings/<name>.py
    python scripts/findings_repro.py --check  # exit 1 if a checked-in script is stale

Each entry below names a finding (integrations/<engine>/findings/FINDINGS.md, indexed in
docs/ENGINE-FINDINGS.md), the smallest input that shows it, the spec the engine is held to
(the reference quantizer, under the conventions the adapter declares) and how a script
calls the engine. The harness computes the expected scales and values
(harness.quantizers.repro) and embeds them; the scripts import only the engine, torch and
numpy. tests/findings/test_repros.py runs each in its engine's venv.
Hand-written scripts for findings that are not a quantizer's (linear kernels, loading) sit
beside them in integrations/<engine>/findings/ with the same exit statuses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from harness.core.conventions import with_conventions
from harness.core.schemes import get_scheme, mx_spec
from harness.core.spec import QuantSpec
from harness.quantizers.repro import EngineCall, standalone_script

ROOT = Path(__file__).resolve().parent.parent


def findings_dir(engine: str) -> Path:
    """Where an engine's findings live: its FINDINGS.md and their scripts."""
    return ROOT / "integrations" / engine / "findings"


def up(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(np.inf)))


@dataclass(frozen=True)
class QuantizerFinding:
    name: str  # the script's file name, without .py
    engine: str  # the engine venv that runs it (.engines/<engine>)
    title: str
    reason: str
    call: EngineCall
    spec: QuantSpec
    x: Callable[[], torch.Tensor]


def _block(*values: float, cols: int = 32, rows: int = 1) -> torch.Tensor:
    x = torch.zeros(rows, cols)
    x.view(-1)[: len(values)] = torch.tensor(values, dtype=torch.float32)
    return x


TORCHAO_TO_MX = """from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.mx_tensor import MXTensor"""


def _to_mx_body(dtype: str, mode: str) -> str:
    return f"""    m = MXTensor.to_mx(x, {dtype}, 32, ScaleCalculationMode.{mode})
    return m.scale.float().flatten(), m.dequantize(torch.float32)"""


QUARK_MXFP = "from quark.torch.kernel.hw_emulation.hw_emulation_interface import real_quantize_mxfp"
QUARK_MXFP_BODY = """    out = real_quantize_mxfp(x, "fp4", -1, 32).float()
    out = out.reshape(x.shape[0], -1, 33)
    scale, values = out[..., 0], out[..., 1:]
    return scale.flatten(), (values * scale[..., None]).reshape(x.shape)"""
TORCHAO_FLOAT8 = """from torchao.quantization.granularity import PerRow
from torchao.quantization.quantize_.common import KernelPreference
from torchao.quantization.quantize_.workflows.float8.float8_tensor import Float8Tensor"""
TORCHAO_FLOAT8_BODY = """    t = Float8Tensor.from_hp(
        x, granularity=PerRow(), kernel_preference=KernelPreference.TORCH
    )
    return t.scale.float().flatten(), t.qdata.float() * t.scale.float()"""
TORCHAO_SCALE_DTYPE = (
    "from torchao.quantization.quant_primitives import "
    "_choose_scale_float8, _quantize_affine_float8"
)
TORCHAO_SCALE_DTYPE_BODY = """    # as a bf16 model hands it over (exact)
    xb = x.bfloat16()
    s = _choose_scale_float8(
        xb, block_size=[1, x.shape[1]], float8_dtype=torch.float8_e4m3fn
    )
    q = _quantize_affine_float8(xb, s, torch.float8_e4m3fn)
    return s.float().flatten(), q.float() * s.float()"""

E4M3_RCEIL = mx_spec("e4m3fn", "rceil")
TORCHAO_MX_CONVENTIONS = frozenset(
    {"mx_inf_amax_as_2pow128", "mx_min_scale_divides_as_2pow-126", "mx_inf_amax_scale_0xfe"}
)

FINDINGS: tuple[QuantizerFinding, ...] = (
    QuantizerFinding(
        "torchao_rceil_above_max",
        "torchao",
        "torchao to_mx RCEIL: a block one float32 step above 448 * 2^4 gets scale 2^4, not 2^5",
        """RCEIL is "the smallest power of two with amax / scale <= max" (torchao's docstring
points to cuBLAS's definition, which its SM100 path implements with cvt.rp.ue8m0).
amax = nextafter(448 * 16) = 7168.0005; 7168.0005 / 2^4 = 448.00003 > 448, so the scale is
2^5 (7168.0005 / 32 = 224.00002 <= 448). The float32 fallback computes
ceil(log2(amax / 448)) = ceil(log2(16.000001)) and log2 rounds to exactly 4.0.
Dequantized values agree here (448 saturated * 2^4 = 224 * 2^5); the scale byte and the
element codes do not, so a CPU/eager run and the definition (or an SM100 compiled run)
disagree bit for bit. Affected: k >= 4 or k <= -5, every element format.""",
        EngineCall("torchao", TORCHAO_TO_MX, _to_mx_body("torch.float8_e4m3fn", "RCEIL")),
        with_conventions(E4M3_RCEIL, TORCHAO_MX_CONVENTIONS),
        lambda: _block(up(448.0 * 2.0**4), 1.0),
    ),
    QuantizerFinding(
        "torchao_rceil_code0_multiplier",
        "torchao",
        "torchao to_mx RCEIL: a block with scale code 0x00 (2^-127) is multiplied by 1",
        """With amax = 448 * 2^-127 the RCEIL scale is 2^-127 (E8M0 code 0x00), and the block's
elements are amax / 2^-127 = 448 (code 0x7E) and so on; dequantized, the block comes back
as itself. _to_mx_rceil sets the reciprocal to 1.0 where the exponent code is 0 (meant
for all-zero blocks), so the elements are x * 1, which round to 0 in e4m3fn, while the
stored scale still says 2^-127: every element of the block dequantizes to 0.""",
        EngineCall("torchao", TORCHAO_TO_MX, _to_mx_body("torch.float8_e4m3fn", "RCEIL")),
        with_conventions(E4M3_RCEIL, TORCHAO_MX_CONVENTIONS),
        lambda: _block(448.0 * 2.0**-127, -224.0 * 2.0**-127),
    ),
    QuantizerFinding(
        "torchao_float8_zero_row_nan",
        "torchao",
        "torchao Float8Tensor.from_hp per row: an all-zero row comes back NaN",
        """A row of zeros has amax 0; any positive scale quantizes it to zero codes, which
dequantize to 0 (the harness's reference uses scale 1 for a zero tile). _choose_scale_float8
returns amax / 448 = 0 with no floor and _quantize_affine_float8 divides by it: 0 / 0 = NaN.
pytorch/ao#4713 (open).""",
        EngineCall("torchao", TORCHAO_FLOAT8, TORCHAO_FLOAT8_BODY),
        get_scheme("fp8_per_channel").weight,
        lambda: _block(1.0, -2.0, 0.5, 3.0, cols=4, rows=2),
    ),
    QuantizerFinding(
        "torchao_float8_scale_in_bf16",
        "torchao",
        "torchao _choose_scale_float8: the dynamic scale of a bf16 activation is rounded to bf16",
        """The scale is amax / 448 in float32 (scale_dtype=torch.float32 is the function's own
argument, and _quantize_affine_float8 divides in float32): 3 / 448 = 0.0066964286, so the
row's largest element is exactly 448 * scale. _choose_scale_float8 divides while amax is
still bf16, giving bf16(3 / 448) = 0.006683349609375; rounded down, 3.0 exceeds 448 * scale
and saturates (3.0 -> 2.994), and 2.890625 lands on the same code.""",
        EngineCall("torchao", TORCHAO_SCALE_DTYPE, TORCHAO_SCALE_DTYPE_BODY),
        get_scheme("fp8_per_channel").weight,
        lambda: _block(3.0, 2.890625, cols=2),
    ),
    QuantizerFinding(
        "quark_mxfp_scale_below_e8m0",
        "quark",
        "Quark real_quantize_mxfp: a block with amax 2^-126 gets scale 2^-128, below E8M0",
        """OCP MX v1.0 section 6.3: the scale is 2^(floor(log2 amax) - emax), and E8M0 holds
2^-127..2^127, so the exponent is clamped to -127: amax 2^-126 with emax 2 (FP4) gives
2^-128 -> 2^-127. A packed checkpoint cannot store 2^-128; the GPU kernel and this
emulation disagree there.""",
        EngineCall("amd-quark", QUARK_MXFP, QUARK_MXFP_BODY),
        mx_spec("e2m1", "floor"),
        lambda: _block(2.0**-126, -(2.0**-127)),
    ),
    QuantizerFinding(
        "quark_mxfp_floor_below_pow2",
        "quark",
        "Quark real_quantize_mxfp: amax one float32 step below 8 gets scale 2, not 1 (FP4)",
        """OCP MX v1.0 section 6.3: the scale is 2^(floor(log2 amax) - emax). amax =
nextafter(8, 0) = 7.9999995 has log2 just below 3, so floor gives 2 and the FP4 scale is
2^(2 - 2) = 1 (the largest element then saturates to 6, the spec's known loss). Quark takes
torch.floor(torch.log2(amax)) in float32, where log2(7.9999995) rounds to 3.0, and picks 2:
one binade high, so small elements land on a grid twice as coarse (0.3 -> 0 instead of
0.5). The same at nextafter(2^n, 0) for every n outside [-1, 2], all FP4/FP6 formats.""",
        EngineCall("amd-quark", QUARK_MXFP, QUARK_MXFP_BODY),
        mx_spec("e2m1", "floor"),
        lambda: _block(float(np.nextafter(np.float32(8.0), np.float32(0))), 0.3),
    ),
    QuantizerFinding(
        "quark_mxfp_inf_block",
        "quark",
        "Quark real_quantize_mxfp: a block holding +Inf gets scale inf, not the NaN scale",
        """OCP MX v1.0: a block with Inf or NaN gets the NaN scale (E8M0 0xFF), and every
element of it is NaN. Quark returns scale inf and elements 0 / NaN: the packed format has
no Inf scale to store.""",
        EngineCall("amd-quark", QUARK_MXFP, QUARK_MXFP_BODY),
        mx_spec("e2m1", "floor"),
        lambda: _block(1.0, float("inf"), 0.5),
    ),
)


def render(f: QuantizerFinding) -> str:
    return standalone_script(f.title, f.reason, f.call, f.x(), f.spec)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a script is stale")
    args = parser.parse_args(argv)
    stale = []
    for f in FINDINGS:
        path = findings_dir(f.engine) / f"{f.name}.py"
        text = render(f)
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path.name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale: " + ", ".join(stale) + " (run scripts/findings_repro.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
