"""Seeded, varied results documents for the report's property tests.

Each document is a valid `qharness.results/1` file built from the record schema's own
fields (`harness.report.reading.schema.FIELDS`: record keys and metrics, with the JSON types
validation holds them to): every outcome, skips with and without reasons, failures and
xfails, the memory suite's peaks, the model suite's records, simulated executions, names
with Markdown, HTML, terminal escapes, bidi controls, unicode and whitespace that folds
alike, names past the escaper's length limit, NaN and infinite SQNR, integer metrics, and
empty runs, on several platforms. Same seed, same document.
"""

from __future__ import annotations

import random
from typing import Any

from harness.platform.simulate import EXECUTIONS
from harness.report.reading.results import OUTCOMES, SCHEMA

PLATFORMS = (
    {"device": "cpu", "arch": "x86_64", "name": "x86_64", "torch_version": "2.13.0"},
    {"device": "cuda", "arch": "sm_90", "name": "NVIDIA H100", "torch_version": "2.13.0+cu128"},
    {"device": "rocm", "arch": "gfx942", "name": "MI300X", "torch_version": "2.13.0+rocm7"},
    {"device": "cpu", "arch": "gfx950", "name": "simulated <b>|gfx950|</b>", "torch_version": "2"},
)
LONG = "s" * 310  # past `md_inline`'s 300 characters: two such names read alike
ODD = (
    "a|b",
    "x\ny",
    "x  y",
    " x y",
    "*emph* _u_ `c` [l](u)",
    "<script>&amp;",
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "ünïcödé 漢字 🙂",
    LONG + "a",
    LONG + "b",
    "",
)
SUITES = ("linear", "moe", "memory", "quantizers", "models", "benchmark", None, "", "x|y")
SCHEMES = ("fp8_per_tensor", "mxfp4", "w4a16_awq", "int8_per_channel", None, *ODD)
PATHS = ("emulated", "vllm_triton", "aiter_ck", "torchao", None, *ODD)
REASONS = (
    None,
    "no GPU",
    "needs vLLM",
    "needs vLLM",
    "shape not supported\nby this kernel",
    "AssertionError: SQNR 3.2 dB < floor 20 dB",
    "<img src=x onerror=alert(1)>",
    "\x1b]8;;http://x\x07link\x1b]8;;\x07",
    "bidi \u2066 isolate \u2069",
    "r" * 2500,
    "",
    *ODD,
)


def _pick(rng: random.Random, pool: tuple[Any, ...], narrow: int) -> Any:
    """From the first ``narrow`` entries mostly (names repeat, as in a run), else any."""
    return rng.choice(pool[:narrow] if rng.random() < 0.8 else pool)


def _sqnr(rng: random.Random, ints: bool) -> Any:
    if ints:
        return rng.randint(-5, 60)
    roll = rng.random()
    if roll < 0.04:
        return float("nan")
    if roll < 0.06:
        return rng.choice((float("inf"), float("-inf")))
    if roll < 0.12:
        return rng.randint(0, 50)
    return round(rng.uniform(-10.0, 60.0), rng.choice((1, 3, 6, 12)))


def _record(rng: random.Random, i: int, ints: bool, peak_ints: bool) -> dict[str, Any]:
    suite = _pick(rng, SUITES, 3)
    outcome = rng.choice(OUTCOMES)
    record: dict[str, Any] = {
        "nodeid": f"suites/test_{suite or 'x'}.py::test_{i}[{rng.choice(ODD)}]",
        "suite": suite,
        "scheme": _pick(rng, SCHEMES, 4),
        "path": _pick(rng, PATHS, 4),
        "outcome": outcome,
        "duration_s": round(rng.uniform(0, 3), 4),
    }
    if outcome != "passed" or rng.random() < 0.1:
        record["reason"] = _pick(rng, REASONS, 5)
    if rng.random() < 0.3:
        record["execution"] = rng.choice(tuple(EXECUTIONS))
    for key in ("suite", "scheme", "path"):
        if rng.random() < 0.05:
            del record[key]
    metrics: dict[str, Any] = {}
    if ints or rng.random() < 0.7:
        metrics["sqnr_db"] = _sqnr(rng, ints)
    if peak_ints or rng.random() < 0.4:
        metrics["peak_bytes"] = rng.choice(
            (rng.randint(0, 2**40), 2**62 + rng.randint(0, 999), float(rng.randint(0, 2**30)))
            if not peak_ints
            else (rng.randint(0, 2**40), 2**62 + rng.randint(0, 999))
        )
    if rng.random() < 0.2:
        metrics["worst_error_to_bound"] = rng.uniform(0, 2)
    if rng.random() < 0.2:
        metrics["kernel"] = rng.choice(("emulated", "fused_moe", None))
    if suite == "models" and rng.random() < 0.7:
        metrics |= {
            "model": rng.choice(("tiny-llama", "qwen|mini", "ünï")),
            "tool": rng.choice(("llmcompressor", "quark", None)),
            "preset": rng.choice(("fp8", "w4a16", None)),
            "model_check": rng.choice(("logits", "layers", "layers")),
        }
        for name in ("top1_agreement", "sqnr_vs_emulated_db", "emulated_sqnr_db"):
            if rng.random() < 0.7:
                metrics[name] = round(rng.uniform(0, 40), 3)
    if metrics or rng.random() < 0.5:
        record["metrics"] = metrics if metrics or rng.random() < 0.5 else None
    return record


def results_doc(seed: int) -> dict[str, Any]:
    """One valid results document (module doc); sizes from empty to a few hundred records."""
    rng = random.Random(seed)
    size = rng.choice((0, 1, 3, 12, 40, 40, 150, 400))
    ints = rng.random() < 0.08  # every record an integer SQNR: pandas keeps an int column
    peak_ints = rng.random() < 0.08
    platform = dict(rng.choice(PLATFORMS))
    if rng.random() < 0.1:
        platform["name"] = rng.choice(ODD) or "odd"
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "created": f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T0{rng.randint(0, 9)}:00:00Z",
        "exitstatus": rng.choice((0, 1, 2)),
        "partial": rng.random() < 0.1,
        "platform": platform,
        "records": [_record(rng, i, ints, peak_ints) for i in range(size)],
    }
    if rng.random() < 0.3:
        doc["runner"] = {"key": "k", "label": rng.choice(("rack2", "", "a|b"))}
    return doc
