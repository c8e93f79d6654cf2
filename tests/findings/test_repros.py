"""The standalone repro scripts of docs/findings/ still reproduce their findings.

Each script runs in its engine's venv (``.engines/<engine>``, made by scripts/engine.py);
where that venv is absent the case skips and says so. A script exits 0 when the finding
reproduces, 3 when the engine now returns the expected values (the finding is fixed in the
version it prints: move it to FIXED_IN and mark it fixed in docs/ENGINE-FINDINGS.md), 4
when this machine cannot run it (it says why), anything else on an error. The generated
scripts must also match what scripts/findings_repro.py writes today.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = ROOT / "docs" / "findings"
REPRODUCES, FIXED, NOT_HERE = 0, 3, 4

# script -> the engine venv that runs it
REPRO_ENGINES: dict[str, str] = {
    "torchao_rceil_above_max.py": "torchao",
    "torchao_rceil_code0_multiplier.py": "torchao",
    "torchao_float8_zero_row_nan.py": "torchao",
    "torchao_float8_scale_in_bf16.py": "torchao",
    "torchao_nvfp4_zero_tensor_nan.py": "torchao",
    "quark_mxfp_scale_below_e8m0.py": "quark",
    "quark_mxfp_inf_block.py": "quark",
    "quark_mxfp_floor_below_pow2.py": "quark",
    "quark_fake_quantize_scale_in_model_dtype.py": "quark",
    "vllm_channelwise_static_scale_narrow.py": "vllm",
    "vllm_cpu_static_scaled_fp8_quant_missing.py": "vllm",
    "vllm_amx_fp8_w8a16.py": "vllm",
    "vllm_nvfp4_emulation_operands.py": "vllm",
}
# vllm_amx_fp8_w8a16.py checks a documented convention (W8A16 on AMX CPUs) still holds: its
# 0 means "holds", 3 "changed"; it needs AMX tiles (4 elsewhere). So does
# vllm_nvfp4_emulation_operands.py (the emulated NVFP4 linear's operands and bias order).
# script -> the engine version from which it no longer reproduces (a finding fixed upstream)
FIXED_IN: dict[str, str] = {}


def test_every_script_has_an_engine() -> None:
    scripts = sorted(p.name for p in FINDINGS.glob("*.py"))
    assert scripts == sorted(REPRO_ENGINES), "docs/findings/ and REPRO_ENGINES disagree"


# Scripts beside the engine adapters that are not findings: checkpoint makers and helpers.
NOT_FINDINGS = ("make_*.py", "_*.py")


def test_every_engine_script_is_written_up() -> None:
    """A finding declared with a standalone script but never written up in
    docs/ENGINE-FINDINGS.md (verdict, scope, upstream) is not yet a finding."""
    text = (ROOT / "docs" / "ENGINE-FINDINGS.md").read_text()
    dirs = [*ROOT.glob("integrations/*/findings"), ROOT / "scripts" / "vllm_triton", FINDINGS]
    scripts = {p for d in dirs for p in d.glob("*.py")}
    scripts -= {p for d in dirs for pattern in NOT_FINDINGS for p in d.glob(pattern)}
    assert scripts, "no findings scripts found: the glob is wrong"
    missing = sorted(str(p.relative_to(ROOT)) for p in scripts if p.name not in text)
    assert missing == [], f"not named in docs/ENGINE-FINDINGS.md: {missing}"


def test_generated_scripts_are_current() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "findings_repro.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(REPRO_ENGINES))
def test_repro_still_reproduces(script: str) -> None:
    engine = REPRO_ENGINES[script]
    python = ROOT / ".engines" / engine / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no {engine} venv at .engines/{engine} (python3 scripts/engine.py {engine})")
    run = subprocess.run(
        [str(python), str(FINDINGS / script)], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    out = run.stdout + run.stderr[-2000:]
    if run.returncode == NOT_HERE:
        pytest.skip(f"{script}: {run.stdout.strip().splitlines()[-1]}")
    if script in FIXED_IN:
        assert run.returncode == FIXED, f"{script} was fixed in {FIXED_IN[script]}:\n{out}"
        return
    assert run.returncode != FIXED, (
        f"{script} no longer reproduces: the finding is fixed in the engine version printed "
        f"below; add it to FIXED_IN and mark it fixed in docs/ENGINE-FINDINGS.md\n{out}"
    )
    assert run.returncode == REPRODUCES, f"{script} failed to run:\n{out}"
