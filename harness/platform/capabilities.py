"""Capability probe: which native ops really run here, found by running tiny real ops.

Each probe executes a small operation with a known exact answer on the platform's device
and checks the answer; an op that raises or computes a wrong result is "not available",
with the reason recorded. Results are cached per process and device. An expectations
table says what each architecture *should* have, so a kernel that silently disappears
from a platform is reported (and fails `suites/test_platform.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.core.formats import decode, e8m0_decode, encode, get_format
from harness.core.spec import FP8_BLOCK, MX_BLOCK
from harness.ops.block_scaled import blockwise_scaled_mm, mx_scaled_mm
from harness.platform.info import PlatformInfo, detect, platform_key
from harness.platform.simulate import TORCH_KERNELS_AS_ARCH

Probe = Callable[[torch.device], None]
PROBES: dict[str, Probe] = {}


def probe(name: str) -> Callable[[Probe], Probe]:
    """Register a probe: a function that runs a tiny op and raises unless it is right."""

    def register(fn: Probe) -> Probe:
        if name in PROBES:
            raise ValueError(f"capability probe {name!r} registered twice")
        PROBES[name] = fn
        return fn

    return register


@dataclass(frozen=True)
class Capability:
    name: str
    available: bool
    detail: str  # "ok" or the reason it is unavailable


@functools.cache
def probe_all(device: str) -> dict[str, Capability]:
    """Run every registered probe once on ``device`` ("cpu" or "cuda")."""
    results: dict[str, Capability] = {}
    for name, fn in sorted(PROBES.items()):
        try:
            fn(torch.device(device))
        except Exception as exc:  # a probe's whole job is to turn failures into data
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            results[name] = Capability(name, False, reason.strip())
        else:
            results[name] = Capability(name, True, "ok")
    return results


def capabilities(platform: PlatformInfo) -> dict[str, Capability]:
    return probe_all(str(platform.torch_device))


def has(platform: PlatformInfo, name: str) -> bool:
    if name not in PROBES:
        raise KeyError(f"unknown capability {name!r}; known: {sorted(PROBES)}")
    return capabilities(platform)[name].available


def why_not(platform: PlatformInfo, name: str) -> str:
    cap = capabilities(platform)[name]
    return f"probe {name} on {platform.device}/{platform.arch}: {cap.detail}"


# What each architecture is expected to have. The probe is the truth; this table exists so
# that a capability disappearing from a platform fails a test instead of turning into skips.
_FP8_FN_MM = frozenset({"scaled_mm.tensorwise.e4m3fn", "scaled_mm.rowwise.e4m3fn"})
_FP8_FNUZ_MM = frozenset({"scaled_mm.tensorwise.e4m3fnuz", "scaled_mm.rowwise.e4m3fnuz"})
# Block-scaled FP8 (1x128 x 128x128) on sm_90 depends on the cuBLAS version (12.9+) and
# MX on gfx950 on the hipBLASLt build, so those stay probe-only; MX is cuBLAS's on sm_100.
_MX_MM = frozenset({"scaled_mm.mx.e4m3fn", "scaled_mm.mx.e2m1"})
_CPU = frozenset({"scaled_mm.fp32_out_bias", "grouped_mm.bf16"})
EXPECTED: dict[str, frozenset[str]] = {
    # torch >= 2.13 CPU builds run the bf16 grouped GEMM (MoE) with an empty group and FP8
    # `_scaled_mm` tensor-wise and row-wise in one of two kernels (see `cpu_scaled_mm_kernel`):
    # its reference kernel takes both FP8 flavours, oneDNN (AMX-INT8 CPUs) has no e4m3fnuz.
    "cpu": _CPU | _FP8_FN_MM | _FP8_FNUZ_MM,
    "cpu+onednn": _CPU | _FP8_FN_MM,
    "sm_89": _FP8_FN_MM,
    "sm_90": _FP8_FN_MM,
    "sm_100": _FP8_FN_MM | _MX_MM,
    "gfx942": _FP8_FNUZ_MM,
    "gfx950": _FP8_FN_MM,
    # Simulated platforms (harness.platform.simulate): what Triton's interpreter runs for the
    # arch's kernels. The torch CPU ops still run there, but the simulated rows expect only
    # the interpreted ones: the simulation stands for the GPU, not for this CPU.
    "triton-interpret-gfx942": frozenset({"triton.dot.e4m3fnuz"}),
    "triton-interpret-gfx950": frozenset({"triton.dot.e4m3fn", "triton.dot_scaled.e2m1"}),
    "triton-interpret-sm_90": frozenset({"triton.dot.e4m3fn"}),
}


def cpu_scaled_mm_kernel() -> str:
    """Which kernel torch's CPU `_scaled_mm` runs: "onednn" where mkldnn is enabled and the
    CPU has AMX-INT8 (aten's `_scaled_mm_out_cpu` tests exactly that), else "reference"."""
    amx_int8 = bool(torch.cpu.get_capabilities().get("amx_int8", False))
    onednn = bool(torch._C._has_mkldnn) and torch.backends.mkldnn.enabled
    return "onednn" if onednn and amx_int8 else "reference"


def expected_key(platform: PlatformInfo) -> str:
    """The `EXPECTED` row of a platform: its `platform_key`, and on CPU which FP8 kernel.
    Under ``torch:<arch>`` the probes run torch's CPU kernels, so the CPU's row applies."""
    key = platform_key(platform)
    if platform.simulated in TORCH_KERNELS_AS_ARCH:
        key = "cpu"
    return "cpu+onednn" if key == "cpu" and cpu_scaled_mm_kernel() == "onednn" else key


def expected(platform: PlatformInfo) -> frozenset[str]:
    return EXPECTED.get(expected_key(platform), frozenset())


# ---------------------------------------------------------------------------- probes
_PROBE_A = (torch.arange(16 * 32).reshape(16, 32) % 5 - 2).float()
_PROBE_B_T = (torch.arange(16 * 32).reshape(16, 32) % 3 - 1).float()
# Small integers: every product and sum is exact, so the answer is known independently of torch.
_PROBE_PRODUCT = _PROBE_A @ _PROBE_B_T.t()


def _fp8_operands(fmt_name: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A (16x32) and B (32x16, column-major) holding the small integers above."""
    fmt = get_format(fmt_name)
    dtype = fmt.to_torch_dtype()
    a = encode(_PROBE_A, fmt).view(dtype).to(device)
    b_t = encode(_PROBE_B_T, fmt).view(dtype).to(device)  # (N, K) row-major == (K, N) col-major
    return a, b_t.t()


def _check(out: torch.Tensor, expected_out: torch.Tensor) -> None:
    if not torch.equal(out.float().cpu(), expected_out.float().cpu()):
        err = (out.float().cpu() - expected_out.float().cpu()).abs().max().item()
        raise AssertionError(f"wrong result (max abs error {err})")


def _register_scaled_mm_probes(fmt_name: str) -> None:
    @probe(f"scaled_mm.tensorwise.{fmt_name}")
    def tensorwise(device: torch.device) -> None:
        a, b = _fp8_operands(fmt_name, device)
        one = torch.tensor(0.5, device=device)
        two = torch.tensor(2.0, device=device)
        out = torch._scaled_mm(a, b, scale_a=one, scale_b=two, out_dtype=torch.bfloat16)
        _check(out, _PROBE_PRODUCT)

    @probe(f"scaled_mm.rowwise.{fmt_name}")
    def rowwise(device: torch.device) -> None:
        a, b = _fp8_operands(fmt_name, device)
        sa = torch.full((a.shape[0], 1), 0.5, device=device)
        sb = torch.full((1, b.shape[1]), 2.0, device=device)
        out = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        _check(out, _PROBE_PRODUCT)


for _fmt in ("e4m3fn", "e4m3fnuz"):
    _register_scaled_mm_probes(_fmt)


@probe("scaled_mm.fp32_out_bias")
def _fp32_out_bias(device: torch.device) -> None:
    a, b = _fp8_operands("e4m3fn", device)
    one = torch.tensor(1.0, device=device)
    bias = torch.full((b.shape[1],), 0.25, device=device)
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, bias=bias, out_dtype=torch.float32)
    _check(out, _PROBE_PRODUCT + 0.25)


# ------------------------------------------------------------ grouped GEMM probes (MoE)
# Three groups of 16, 0 and 16 rows: the empty group checks the offsets contract for an
# expert that receives no tokens. Weights of group g are (g + 1) * _PROBE_B_T.
_GROUP_COUNTS = (16, 0, 16)


def _grouped_probe_operands() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    a = torch.cat([_PROBE_A, -_PROBE_A])  # [32, 32]
    w = torch.stack([(g + 1) * _PROBE_B_T for g in range(len(_GROUP_COUNTS))])  # [3, 16, 32]
    expected = torch.cat([_PROBE_A @ w[0].t(), -_PROBE_A @ w[2].t()])
    return a, w, torch.tensor(_GROUP_COUNTS), expected


@probe("grouped_mm.bf16")
def _grouped_mm_bf16(device: torch.device) -> None:
    from harness.ops.grouped import grouped_mm_bf16

    a, w, counts, expected_out = _grouped_probe_operands()
    out = grouped_mm_bf16(
        a.to(device, torch.bfloat16), w.to(device, torch.bfloat16), counts.to(device)
    )
    _check(out, expected_out)


def _register_scaled_grouped_probe(fmt_name: str) -> None:
    @probe(f"scaled_grouped_mm.rowwise.{fmt_name}")
    def rowwise(device: torch.device) -> None:
        from harness.ops.grouped import scaled_grouped_mm_rowwise

        fmt = get_format(fmt_name)
        dtype = fmt.to_torch_dtype()
        a, w, counts, expected_out = _grouped_probe_operands()
        a8 = encode(a, fmt).view(dtype).to(device)
        w8 = encode(w, fmt).view(dtype).to(device)
        sa = torch.full((a.shape[0],), 0.5, device=device)
        sw = torch.full((w.shape[0], w.shape[1]), 2.0, device=device)
        try:
            out = scaled_grouped_mm_rowwise(a8, sa, w8, sw, counts.to(device))
        except NotImplementedError as exc:  # torch's message lists every dispatch key
            raise NotImplementedError(
                f"torch._scaled_grouped_mm has no {device.type} kernel in this build"
            ) from exc
        _check(out, expected_out)


for _fmt in ("e4m3fn", "e4m3fnuz"):
    _register_scaled_grouped_probe(_fmt)


# ------------------------------------------------------------- block-scaled probes
# Same small integers; every block gets its own power-of-two scale, so a scale placed in
# the wrong block changes the answer. All partial sums are exact in float32, so the kernel
# result is the float64 product rounded once to bfloat16, whatever the summation order.
_BLOCK_M, _BLOCK_N, _BLOCK_K = 16, 2 * FP8_BLOCK, 2 * FP8_BLOCK
_MX_M, _MX_N, _MX_K = 16, 64, 4 * MX_BLOCK


def _int_operands(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    a = (torch.arange(m * k).reshape(m, k) % 5 - 2).float()
    b = (torch.arange(n * k).reshape(n, k) % 3 - 1).float()
    return a, b


def _pow2_grid(rows: int, cols: int) -> torch.Tensor:
    """Exponents -1, 0, 1 that change from block to block along both axes (not symmetric)."""
    r = torch.arange(rows)[:, None]
    c = torch.arange(cols)[None, :]
    return ((r + 2 * c) % 3 - 1).to(torch.int32)


def _expected(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
    """float64 product of block-scaled operands (scales [rows/br, K/bc] broadcast)."""

    def full(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        br, bc = x.shape[0] // s.shape[0], x.shape[1] // s.shape[1]
        return x.double() * s.double().repeat_interleave(br, 0).repeat_interleave(bc, 1)

    return (full(a, sa) @ full(b, sb).t()).to(torch.bfloat16)


def _register_blockwise_probe(fmt_name: str) -> None:
    @probe(f"scaled_mm.blockwise.{fmt_name}")
    def blockwise(device: torch.device) -> None:
        a, b = _int_operands(_BLOCK_M, _BLOCK_N, _BLOCK_K)
        sa = torch.exp2(_pow2_grid(_BLOCK_M, _BLOCK_K // FP8_BLOCK).float())
        sb = torch.exp2(_pow2_grid(_BLOCK_N // FP8_BLOCK, _BLOCK_K // FP8_BLOCK).float())
        a_codes, b_codes = encode(a, fmt_name), encode(b, fmt_name)
        out = blockwise_scaled_mm(
            a_codes.to(device), sa.to(device), b_codes.to(device), sb.to(device),
            fmt_name, torch.bfloat16,
        )  # fmt: skip
        _check(out, _expected(a, sa, b, sb))


def _register_mx_probe(fmt_name: str) -> None:
    @probe(f"scaled_mm.mx.{fmt_name}")
    def mx(device: torch.device) -> None:
        a, b = _int_operands(_MX_M, _MX_N, _MX_K)
        sa_codes = (127 + _pow2_grid(_MX_M, _MX_K // MX_BLOCK)).to(torch.uint8)
        sb_codes = (127 + _pow2_grid(_MX_N, _MX_K // MX_BLOCK).flip(0)).to(torch.uint8)
        a_codes, b_codes = encode(a, fmt_name), encode(b, fmt_name)
        out = mx_scaled_mm(
            a_codes.to(device), sa_codes.to(device), b_codes.to(device), sb_codes.to(device),
            fmt_name, torch.bfloat16,
        )  # fmt: skip
        a_val, b_val = decode(a_codes, fmt_name), decode(b_codes, fmt_name)
        _check(out, _expected(a_val, e8m0_decode(sa_codes), b_val, e8m0_decode(sb_codes)))


for _fmt in ("e4m3fn", "e4m3fnuz"):
    _register_blockwise_probe(_fmt)
for _fmt in ("e4m3fn", "e2m1"):
    _register_mx_probe(_fmt)


# ------------------------------------------------- Triton interpreter probes (simulated)
# Which Triton ops the simulated arch's kernels may use: the FP8 flavour of its MFMA/MMA
# units and MXFP4 `tl.dot_scaled` (gfx950's scaled MFMA; sm_90 has no MXFP4 MMA). The
# interpreter itself would run every one of them on any arch, so the arch table gates the
# probe, and the probe then checks that the interpreter computes the exact answer.
TRITON_DOT_ARCHS: dict[str, frozenset[str]] = {
    "e4m3fn": frozenset({"gfx950", "sm_90"}),
    "e4m3fnuz": frozenset({"gfx942"}),
}
TRITON_DOT_SCALED_ARCHS: dict[str, frozenset[str]] = {"e2m1": frozenset({"gfx950"})}


def _simulated_arch_with(op: str, archs: frozenset[str]) -> None:
    """Raise unless this process simulates an arch in ``archs`` under Triton's interpreter."""
    info = detect()
    if info.simulated != "triton-interpret":
        raise RuntimeError("Triton runs here only under QHARNESS_SIMULATE=triton-interpret:<arch>")
    if info.arch not in archs:
        raise RuntimeError(f"{info.arch} has no {op} (only {', '.join(sorted(archs))})")


def _register_triton_dot_probe(fmt_name: str) -> None:
    @probe(f"triton.dot.{fmt_name}")
    def triton_dot(device: torch.device) -> None:
        _simulated_arch_with(f"FP8 {fmt_name} tl.dot", TRITON_DOT_ARCHS[fmt_name])
        from harness.platform import triton_kernels

        a, b_t = _fp8_operands(fmt_name, device)
        _check(triton_kernels.dot(a, b_t.contiguous()), _PROBE_PRODUCT)


for _fmt in sorted(TRITON_DOT_ARCHS):
    _register_triton_dot_probe(_fmt)


@probe("triton.dot_scaled.e2m1")
def _triton_dot_scaled_e2m1(device: torch.device) -> None:
    _simulated_arch_with("MXFP4 tl.dot_scaled", TRITON_DOT_SCALED_ARCHS["e2m1"])
    from harness.core.formats import pack_fp4
    from harness.platform import triton_kernels

    a, b = _int_operands(_MX_M, _MX_N, _MX_K)
    a, b = a.clamp(-6, 6), b.clamp(-6, 6)  # small integers are exact in e2m1
    sa_codes = (127 + _pow2_grid(_MX_M, _MX_K // MX_BLOCK)).to(torch.uint8)
    sb_codes = (127 + _pow2_grid(_MX_N, _MX_K // MX_BLOCK).flip(0)).to(torch.uint8)
    a_codes, b_codes = encode(a, "e2m1"), encode(b, "e2m1")
    out = triton_kernels.dot_scaled_e2m1(
        pack_fp4(a_codes), sa_codes.contiguous(), pack_fp4(b_codes), sb_codes.contiguous()
    )
    a_val, b_val = decode(a_codes, "e2m1"), decode(b_codes, "e2m1")
    want = _expected(a_val, e8m0_decode(sa_codes), b_val, e8m0_decode(sb_codes)).float()
    _check(out.to(torch.bfloat16), want)
