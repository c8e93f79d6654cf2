"""The engine findings keep their layout, and their standalone repro scripts still reproduce.

Each engine's findings are written up in integrations/<engine>/findings/FINDINGS.md, beside
their scripts; docs/ENGINE-FINDINGS.md is the index, one row per finding. Each script runs
in its engine's venv (``.engines/<engine>``, made by scripts/engine.py); where that venv is
absent the case skips and says so. A script exits 0 when the finding reproduces, 3 when the
engine now returns the expected values (the finding is fixed in the version it prints: move
it to FIXED_IN and mark it fixed in its FINDINGS.md and the index), 4 when this machine
cannot run it (it says why), anything else on an error. The generated scripts must also
match what scripts/findings_repro.py writes today.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
INDEX = ROOT / "docs" / "ENGINE-FINDINGS.md"
ENGINES = ("torchao", "quark", "vllm", "aiter", "sglang")
# Engines whose FINDINGS.md says "No findings yet": no scripts, no sections, no index rows
# (test_engines_without_findings_say_so holds them to it).
NO_FINDINGS_YET: frozenset[str] = frozenset()
REPRODUCES, FIXED, NOT_HERE = 0, 3, 4

# script -> the engine venv that runs it
REPRO_ENGINES: dict[str, str] = {
    "torchao_rceil_above_max.py": "torchao",
    "torchao_rceil_code0_multiplier.py": "torchao",
    "torchao_float8_zero_row_nan.py": "torchao",
    "torchao_float8_scale_in_bf16.py": "torchao",
    "torchao_nvfp4_zero_tensor_nan.py": "torchao",
    "torchao_nvfp4_block_scale_min_normal.py": "torchao",
    "quark_mxfp_scale_below_e8m0.py": "quark",
    "quark_mxfp_inf_block.py": "quark",
    "quark_mxfp_floor_below_pow2.py": "quark",
    "quark_fake_quantize_scale_in_model_dtype.py": "quark",
    "vllm_channelwise_static_scale_narrow.py": "vllm",
    "vllm_cpu_static_scaled_fp8_quant_missing.py": "vllm",
    "vllm_amx_fp8_w8a16.py": "vllm",
    "vllm_nvfp4_emulation_operands.py": "vllm",
    "vllm_cpu_fused_act_quant_reach.py": "vllm",
    "torchao_mx_e8m0_ends.py": "torchao",
    "vllm_mxfp8_torch_quant_edges.py": "vllm",
    "vllm_cpu_router_correction_bias.py": "vllm",
    "vllm_ue8m0_group_floor_order.py": "vllm",
    "sglang_nonfinite_group_quant.py": "sglang",
    "aiter_blockscale_splitk_partial_blocks.py": "aiter",
    "aiter_fp4_utils_ties_away.py": "aiter",
    "aiter_fp4_utils_scale_row_groups.py": "aiter",
    "vllm_fnuz_e8m0_scale_double.py": "vllm",
    "vllm_group_quant_ue8m0_fallback_floor.py": "vllm",
    "vllm_block_fp8_tile_spans_groups.py": "vllm",
    "vllm_nvfp4_fused_global_max.py": "vllm",
}
# vllm_amx_fp8_w8a16.py checks a documented convention (W8A16 on AMX CPUs) still holds: its
# 0 means "holds", 3 "changed"; it needs AMX tiles (4 elsewhere). So does
# vllm_nvfp4_emulation_operands.py (the emulated NVFP4 linear's operands and bias order), and
# sglang_nonfinite_group_quant.py (SGLang's non-finite sanitization of FP8 activations).
# script -> the engine version from which it no longer reproduces (a finding fixed upstream)
FIXED_IN: dict[str, str] = {}


def findings_dir(engine: str) -> Path:
    """An engine's findings: its FINDINGS.md and the scripts it names."""
    return ROOT / "integrations" / engine / "findings"


def repro_path(script: str) -> Path:
    return findings_dir(REPRO_ENGINES[script]) / script


def test_every_script_has_an_engine() -> None:
    """Each repro the venv test runs sits in its engine's findings folder, and every script
    named for an engine venv there is in REPRO_ENGINES (none left behind in docs/)."""
    missing = sorted(s for s in REPRO_ENGINES if not repro_path(s).is_file())
    assert missing == [], f"not in integrations/<engine>/findings/: {missing}"
    prefixed = {
        p.name for engine in {*REPRO_ENGINES.values()} for p in findings_dir(engine).glob("*.py")
    }
    prefixed = {name for name in prefixed if name.split("_")[0] in {*REPRO_ENGINES.values()}}
    assert sorted(prefixed) == sorted(REPRO_ENGINES), "findings folders and REPRO_ENGINES disagree"
    assert sorted((ROOT / "docs").rglob("*.py")) == [], "findings scripts belong beside FINDINGS.md"


# Scripts beside the engine adapters that are not findings: checkpoint makers and helpers.
NOT_FINDINGS = ("make_*.py", "_*.py")


# Script folders outside integrations/<engine>/findings/ -> the engine whose FINDINGS.md
# writes them up.
OTHER_SCRIPT_DIRS: dict[str, str] = {"scripts/vllm_triton": "vllm"}


def test_every_engine_script_is_written_up() -> None:
    """A finding declared with a standalone script but never written up in its engine's
    FINDINGS.md (verdict, scope, upstream) is not yet a finding."""
    dirs = {findings_dir(e): e for e in ENGINES} | {
        ROOT / d: e for d, e in OTHER_SCRIPT_DIRS.items()
    }
    assert sorted(p.parent.name for p in ROOT.glob("integrations/*/findings")) == sorted(ENGINES), (
        "an engine's findings folder is missing from ENGINES"
    )
    missing = []
    for folder, engine in dirs.items():
        if engine in NO_FINDINGS_YET:
            continue  # test_engines_without_findings_say_so
        scripts = {p for p in folder.glob("*.py")}
        scripts -= {p for pattern in NOT_FINDINGS for p in folder.glob(pattern)}
        assert scripts, f"no findings scripts in {folder}: the glob is wrong"
        text = (findings_dir(engine) / "FINDINGS.md").read_text()
        missing += [str(p.relative_to(ROOT)) for p in sorted(scripts) if p.name not in text]
    assert missing == [], f"not named in their engine's FINDINGS.md: {missing}"


def test_engines_without_findings_say_so() -> None:
    """An engine listed as having no findings yet has no scripts, no sections, no rows in
    the index, and its FINDINGS.md says so; once it has one, it leaves NO_FINDINGS_YET."""
    index = INDEX.read_text()
    for engine in NO_FINDINGS_YET:
        folder = findings_dir(engine)
        text = (folder / "FINDINGS.md").read_text()
        assert "No findings yet" in text, engine
        assert not re.findall(r"^## ", text, flags=re.MULTILINE), engine
        assert not list(folder.glob("*.py")), f"{engine}: scripts but no finding written up"
        assert f"integrations/{engine}/findings/FINDINGS.md#" not in index, engine


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchor_matches_the_rendered_form() -> None:
    assert anchor("vLLM 0.32: `to_mx(..., RCEIL)` a -> b") == "vllm-032-to_mx-rceil-a---b"


def test_every_finding_is_in_the_index() -> None:
    """Each section of an engine's FINDINGS.md has a row in docs/ENGINE-FINDINGS.md that
    links to it, and every row links to a section that exists."""
    index = INDEX.read_text()
    linked = set(re.findall(r"\]\(\.\./(integrations/\w+/findings/FINDINGS\.md#[^)]+)\)", index))
    sections = set()
    for engine in set(ENGINES) - NO_FINDINGS_YET:
        text = (findings_dir(engine) / "FINDINGS.md").read_text()
        headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
        assert headings, f"{engine}: FINDINGS.md has no sections"
        sections |= {f"integrations/{engine}/findings/FINDINGS.md#{anchor(h)}" for h in headings}
    assert sorted(sections - linked) == [], "sections without a row in docs/ENGINE-FINDINGS.md"
    assert sorted(linked - sections) == [], "index rows that link to no section"
    rows = [line for line in index.splitlines() if "/findings/FINDINGS.md#" in line]
    assert len(rows) == len(sections), "one row per finding"


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
        [str(python), str(repro_path(script))], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    out = run.stdout + run.stderr[-2000:]
    if run.returncode == NOT_HERE:
        pytest.skip(f"{script}: {run.stdout.strip().splitlines()[-1]}")
    if script in FIXED_IN:
        assert run.returncode == FIXED, f"{script} was fixed in {FIXED_IN[script]}:\n{out}"
        return
    assert run.returncode != FIXED, (
        f"{script} no longer reproduces: the finding is fixed in the engine version printed "
        f"below; add it to FIXED_IN and mark it fixed in its FINDINGS.md and the index\n{out}"
    )
    assert run.returncode == REPRODUCES, f"{script} failed to run:\n{out}"
