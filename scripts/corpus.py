#!/usr/bin/env python3
"""Put real upstream bugs back into the engines and see whether the suites catch them.

    python3 scripts/corpus.py list
    python3 scripts/corpus.py check
    python3 scripts/corpus.py run [ID ...] [--out DIR] [--jobs N] [--runnable-only]
    python3 scripts/corpus.py docs [--run DIR] [--baseline FILE]

Each entry of ``corpus/`` (format: corpus/README.md) names a bug, the engine stage of
``scripts/engine.py`` that runs the code it lives in, and the fault (a patch against the
installed engine, or a monkeypatch applied at import). ``run`` builds, per entry, a scratch
**overlay** of the engine's package (directories mirrored, files linked to the venv, the
faulty files copied and patched) that goes first on ``PYTHONPATH``; the venv itself is never
written, so a runner killed by any signal leaves the engine intact (the next run clears the
scratch). It then runs the stage's own selection, narrowed by the entry's ``-k``, once with
the fault and once on the control (the installed code, or for a ``present`` bug the
forward-ported fix), with the suites and checks exactly as they are. Outcome:

- **caught**: a test that is not an xfail fails with the fault, and the control passes;
  or a **known finding** names the bug: a test xfails with the fault and passes with the
  control (the forward-ported fix of a present bug), or xfails on both sides naming fewer
  findings on the control (the harness names every finding whose rule explains a case);
- **missed**: both pass (the note says when the faulty file was never imported);
- **broken**: the control fails, the fault does not apply, or a run errors out.

Results go to a run directory (``reports/corpus/``: results.json, one log and junit file per
pytest run); ``docs`` writes docs/CORPUS.md from a run's results and a baseline.
Standard library only (Python 3.11: tomllib), like scripts/engine.py, whose stage table
it reads.
"""

from __future__ import annotations

import argparse
import configparser
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import engine

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus"
SCRATCH = ROOT / ".corpus-scratch"
DEFAULT_OUT = ROOT / "reports" / "corpus"
RUN_MARKER = ".qharness-corpus-run"
RUN_LIMIT_S = 1800  # one pytest run past this is a hang: the entry is broken, not caught

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

PROJECTS = (
    "vllm",
    "aiter",
    "torchao",
    "quark",
    "llm-compressor",
    "compressed-tensors",
    "sglang",
)
KINDS = ("revert", "present", "port")
# The classes real quantization bugs fall in; each entry names one.
BUG_CLASSES: dict[str, str] = {
    "scale-layout": "scale tensor shape, stride, swizzle or indexing",
    "scale-computation": "the scale's value: amax, divisor, reciprocal, floor or clamp",
    "scale-rounding": "how a scale is rounded into its format (E8M0 floor, ceil, RCEIL; E4M3)",
    "rounding": "how elements round into the format: ties, direction, through another dtype",
    "special-values": "NaN, Inf, zero blocks and the format's sentinel codes",
    "fp8-flavour": "e4m3fn vs e4m3fnuz: bounds, normalization, reinterpretation",
    "processing-order": "weight-processing steps applied in the wrong order or twice",
    "bias": "bias dropped, doubled or added in the wrong precision",
    "dispatch": "a scheme or shape sent to a kernel or path that cannot run it",
    "masking-tails": "unmasked loads or stores, sizes that are not a multiple of a block",
    "routing": "MoE expert selection: top-k, grouped top-k, correction bias, scaling",
    "moe-combine": "MoE weights applied wrongly: topk weights, expert bias, reduction",
    "saturation": "clamping and overflow to the format's bound",
    "accumulation": "accumulator or output dtype, cast order, precision of an epilogue",
    "shard-consistency": "fused shards (qkv, gate/up) that must share a scale do not",
    "layer-selection": "which layers a checkpoint quantizes (ignore lists, fused names)",
    "packing": "sub-byte packing: nibble order, code tables, unpacking",
    "platform": "behaviour conditional on the detected platform or arch",
}
UPSTREAM = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+#\d+$")
ENTRY_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
REQUIRED = [
    "id",
    "project",
    "upstream",
    "fix",
    "date",
    "bug_class",
    "wrong",
    "file",
    "function",
    "kind",
    "stage",
    "keyword",
    "runnable",
]


class CorpusError(Exception):
    """Bad input (an entry that breaks the format, an unknown id): one line, exit 2."""


@dataclass(frozen=True)
class Stage:
    """What runs an entry: the engine venv, the pytest files, the stage's -k, the arches."""

    name: str
    venv: str
    adapter: str
    files: tuple[str, ...]
    keyword: str
    simulate: tuple[str, ...] = ()


def engine_stages(table: Path | None = None) -> dict[str, Stage]:
    """The stages of scripts/engine.py, read from its tables (one source of truth), or a
    JSON table of the same fields (``--stages``: a stand-in engine, as the self-tests use)."""
    if table is not None:
        try:
            rows = json.loads(table.read_text())
            return {
                name: Stage(
                    name=name,
                    venv=row["venv"],
                    adapter=row.get("adapter", "."),
                    files=tuple(row["files"]),
                    keyword=row.get("keyword", ""),
                    simulate=tuple(row.get("simulate", ())),
                )
                for name, row in rows.items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorpusError(f"{table}: not a stage table: {exc!r}") from exc
    return {
        name: Stage(
            name=name,
            venv=engine.SHARED_VENV.get(name, name),
            adapter=adapter,
            files=files,
            keyword=keyword,
            simulate=engine.SIMULATIONS.get(name, ()),
        )
        for name, (adapter, files, keyword) in engine.ENGINES.items()
    }


@dataclass(frozen=True)
class Entry:
    """One corpus entry, validated."""

    folder: Path
    meta: dict[str, object]

    @property
    def id(self) -> str:
        return str(self.meta["id"])

    @property
    def runnable(self) -> bool:
        return bool(self.meta["runnable"])

    def text(self, key: str) -> str:
        return str(self.meta.get(key, ""))

    @property
    def fault(self) -> Path | None:
        """The fault file; None for a present bug (the installed code is the fault)."""
        for name in ("fault.patch", "fault.py"):
            if (self.folder / name).is_file():
                return self.folder / name
        return None

    @property
    def control(self) -> Path | None:
        path = self.folder / "control.patch"
        return path if path.is_file() else None


def load_entry(folder: Path, stages: dict[str, Stage]) -> Entry:
    """Read and validate ``folder/entry.toml``; every problem is named, with the file."""
    where = folder / "entry.toml"
    try:
        meta = tomllib.loads(where.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"{where}: {exc}") from exc
    problems = [f"missing field {key!r}" for key in REQUIRED if key not in meta]
    if not problems:
        checks = (
            (meta["id"] == folder.name, f"id {meta['id']!r} is not the folder's name"),
            (ENTRY_ID.match(str(meta["id"])) is not None, "id must be lowercase-with-dashes"),
            (meta["project"] in PROJECTS, f"project not one of {PROJECTS}"),
            (UPSTREAM.match(str(meta["upstream"])) is not None, "upstream is not owner/repo#N"),
            (meta["fix"] == "" or UPSTREAM.match(str(meta["fix"])) is not None, "bad fix"),
            (DATE.match(str(meta["date"])) is not None, "date is not YYYY-MM-DD"),
            (meta["bug_class"] in BUG_CLASSES, f"bug_class not one of {sorted(BUG_CLASSES)}"),
            (meta["kind"] in KINDS, f"kind not one of {KINDS}"),
            (isinstance(meta["runnable"], bool), "runnable must be true or false"),
            (bool(meta["runnable"]) or bool(meta.get("needs")), "not runnable: say why (needs)"),
            (meta["stage"] in stages, f"stage not one of {sorted(stages)}"),
            (
                (meta["kind"] == "present")
                == (not (folder / "fault.patch").is_file() and not (folder / "fault.py").is_file())
                and not ((folder / "fault.patch").is_file() and (folder / "fault.py").is_file()),
                "one fault file (fault.patch or fault.py), none for a present bug",
            ),
            (
                (meta["kind"] == "present") == (folder / "control.patch").is_file(),
                "control.patch exactly when kind is present",
            ),
        )
        problems = [message for ok, message in checks if not ok]
        stage = stages.get(str(meta["stage"]))
        if stage is not None:
            unknown = [f for f in meta.get("files", []) if f not in stage.files]
            if unknown:
                problems.append(f"files not in stage {stage.name}'s files: {unknown}")
            simulate = meta.get("simulate")
            if simulate is not None and simulate not in stage.simulate:
                problems.append(f"simulate {simulate!r} not one of {stage.simulate}")
    if problems:
        raise CorpusError(f"{where}: " + "; ".join(problems))
    return Entry(folder, meta)


def load_corpus(corpus: Path, stages: dict[str, Stage]) -> list[Entry]:
    """Every entry under ``corpus``, sorted by id."""
    folders = sorted(p for p in corpus.iterdir() if (p / "entry.toml").is_file())
    return [load_entry(folder, stages) for folder in folders]


# --- the overlay ---------------------------------------------------------------------


def site_packages(venv: Path) -> Path:
    """The venv's site-packages (``lib/pythonX.Y/site-packages``)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise CorpusError(f"{venv}: no lib/python3*/site-packages (run scripts/engine.py first)")
    return found[0]


PATCH_TARGET = re.compile(r"^\+\+\+ b/(\S+)", re.MULTILINE)


def patched_files(patch: Path) -> list[str]:
    """The site-packages-relative files a ``-p1`` patch writes."""
    return sorted(set(PATCH_TARGET.findall(patch.read_text())))


def mirror(site: Path, overlay: Path, rel: str) -> Path:
    """Make ``overlay/rel`` a real file copied from the venv, every directory on its way a
    real directory whose other entries link back to the venv; returns the copy's path."""
    parts = Path(rel).parts
    src_dir, dst_dir = site, overlay
    for name in parts[:-1]:
        src_dir, dst_dir = src_dir / name, dst_dir / name
        if dst_dir.is_symlink():  # a linked directory on the way: make it real
            dst_dir.unlink()
        if not dst_dir.exists():
            dst_dir.mkdir(parents=True)
            if src_dir.is_dir():
                for child in src_dir.iterdir():
                    if child.name != "__pycache__":
                        (dst_dir / child.name).symlink_to(child)
    target = dst_dir / parts[-1]
    if target.is_symlink():
        target.unlink()
    if (src_dir / parts[-1]).is_file():
        shutil.copyfile(src_dir / parts[-1], target)
    return target


SITECUSTOMIZE = '''"""Corpus overlay: a monkeypatch fault at import; which faulty files ran."""
import atexit, importlib.abc, importlib.util, json, os, sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_SPEC = json.load(open(os.path.join(_HERE, "overlay.json")))


def _reached():
    files = set(_SPEC["patched"])
    hit = sorted(
        rel for rel in files
        if any(getattr(m, "__file__", None) == os.path.join(_HERE, rel)
               for m in list(sys.modules.values()))
    )
    if _SPEC.get("target") and _SPEC["target"] in sys.modules:
        hit.append(_SPEC["target"])
    with open(os.path.join(_HERE, "reached.%d" % os.getpid()), "w") as out:
        json.dump(hit, out)


atexit.register(_reached)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the fault's apply(module) right after its TARGET module is executed."""

    def find_spec(self, name, path, target=None):
        if name != _SPEC.get("target"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        inner = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return inner.create_module(spec)

            def exec_module(self, module):
                inner.exec_module(module)
                fault_spec = importlib.util.spec_from_file_location(
                    "_corpus_fault", os.path.join(_HERE, "_corpus_fault.py"))
                fault = importlib.util.module_from_spec(fault_spec)
                fault_spec.loader.exec_module(fault)
                fault.apply(module)

        spec.loader = _Loader()
        return spec


if _SPEC.get("target"):
    sys.meta_path.insert(0, _AfterImport())
'''


@dataclass
class Overlay:
    """A built overlay: its root (goes first on PYTHONPATH) and what it changed."""

    root: Path
    patched: list[str]
    target: str = ""


def build_overlay(site: Path, root: Path, patch: Path | None) -> Overlay:
    """A fresh overlay at ``root`` with ``patch`` applied (a .patch, a monkeypatch .py, or
    None for the installed code). Raises CorpusError when the patch does not apply."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    overlay = Overlay(root=root, patched=[])
    if patch is not None and patch.suffix == ".patch":
        overlay.patched = patched_files(patch)
        if not overlay.patched:
            raise CorpusError(f"{patch}: no '+++ b/<file>' lines: not a -p1 unified diff")
        for rel in overlay.patched:
            mirror(site, root, rel)
        applied = subprocess.run(
            ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-"],
            cwd=root,
            stdin=patch.open("rb"),
            capture_output=True,
            text=True,
        )
        if applied.returncode != 0:
            raise CorpusError(
                f"{patch.name} does not apply: {applied.stdout.strip()[-300:]}"
                f" {applied.stderr.strip()[-200:]}".strip()
            )
    elif patch is not None:
        source = patch.read_text()
        found = re.search(r"^TARGET\s*=\s*[\"']([\w.]+)[\"']", source, re.MULTILINE)
        if found is None or "def apply(" not in source:
            raise CorpusError(f"{patch}: a fault.py needs TARGET = '<module>' and def apply()")
        overlay.target = found.group(1)
        shutil.copyfile(patch, root / "_corpus_fault.py")
    (root / "overlay.json").write_text(
        json.dumps({"patched": overlay.patched, "target": overlay.target})
    )
    (root / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return overlay


def reached(overlay: Overlay) -> bool:
    """Whether any process of the run imported a faulty file (or the monkeypatch target)."""
    hits: set[str] = set()
    for record in overlay.root.glob("reached.*"):
        try:
            hits.update(json.loads(record.read_text()))
        except (OSError, ValueError):
            continue
    return bool(hits)


# --- one pytest run ------------------------------------------------------------------


@dataclass
class RunResult:
    """One pytest run (fault or control, one arch): its status and failing checks."""

    label: str
    status: int
    seconds: float
    failed: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    reached: bool = False
    note: str = ""
    log: str = ""  # pytest's output (a shared control run's is under the first entry's logs)
    xfailed: list[str] = field(default_factory=list)
    passed: set[str] = field(default_factory=set, repr=False)  # not written to results
    # xfailed test -> the known finding(s) it names (not written to results)
    findings: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass
class JunitOutcome:
    """One run's tests by outcome, ids as ``classname::name`` (failures with the first line
    of their message)."""

    failed: list[str] = field(default_factory=list)
    xfailed: list[str] = field(default_factory=list)
    passed: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    findings: dict[str, str] = field(default_factory=dict)  # xfailed test -> finding text


# The harness's xfail reason for a known finding: "known finding: <text> | <what happened>"
# (harness/pytest_plugin/verdicts.py); the text names the finding(s) the case reproduces.
KNOWN_FINDING_PREFIX = "known finding: "


def finding_named(message: str) -> str:
    """The finding text of a harness xfail reason ("" for another xfail)."""
    if not message.startswith(KNOWN_FINDING_PREFIX):
        return ""
    return message[len(KNOWN_FINDING_PREFIX) :].split(" | ", 1)[0]


def junit_outcome(path: Path) -> JunitOutcome:
    """What a run's junit file says (pytest writes xfails as skips of type pytest.xfail,
    a strict xpass as a failure whose message starts with [XPASS(strict)])."""
    out = JunitOutcome(counts={"tests": 0, "failed": 0, "skipped": 0, "xfailed": 0})
    if not path.is_file():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        out.counts["tests"] += 1
        ident = f"{case.get('classname', '')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            out.counts["failed"] += 1
            message = (bad.get("message") or "").strip().splitlines()
            first = message[0][:200] if message else ""
            out.failed.append(ident + (f": {first}" if first else ""))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            out.counts["xfailed"] += 1
            out.xfailed.append(ident)
            out.findings[ident] = finding_named((skipped.get("message") or "").strip())
        elif skipped is not None:
            out.counts["skipped"] += 1
        else:
            out.passed.add(ident)
    return out


_CHILDREN: set[subprocess.Popen[bytes]] = set()
_CHILDREN_LOCK = threading.Lock()
_STOP = threading.Event()  # set by SIGINT/SIGTERM: no new pytest run starts
# control runs of this invocation by (stage, files, -k, arch, control patch): entries that
# share a selection and leave the engine as installed share one control run
_CONTROLS: dict[tuple[str, tuple[str, ...], str, str, str], RunResult] = {}


def run_pytest(
    stage: Stage,
    entry: Entry,
    overlay: Overlay,
    simulate: str,
    logs: Path,
    label: str,
    python: Path,
    limit_s: float,
) -> RunResult:
    """The stage's selection narrowed by the entry's -k, on the overlay, in its own
    process group (so an interrupted runner can stop it whole)."""
    files = list(entry.meta.get("files") or stage.files)
    keyword = " and ".join(f"({k})" for k in (stage.keyword, entry.text("keyword")) if k)
    junit = logs / f"{label}.xml"
    cmd = [str(python), "-c", DIE_WITH_PARENT, str(python), "-m", "pytest"]
    cmd += ["-p", "no:cacheprovider", "-q", "-W", "ignore", "-rfExX"]
    cmd += ["-n", "0"] if "xdist" in stage_plugins(python) else []
    cmd += [*(("-k", keyword) if keyword else ()), f"--junitxml={junit}", *files]
    adapter = ROOT / stage.adapter
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in (overlay.root, ROOT, adapter)),
        # bytecode of the overlay (and of the venv's files seen through it) goes here,
        # never into the venv
        "PYTHONPYCACHEPREFIX": str(overlay.root.parent / "pycache"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if simulate:
        env |= {"QHARNESS_SIMULATE": simulate, "TRITON_INTERPRET": "1"}
    start = time.monotonic()
    log = logs / f"{label}.log"
    with log.open("w") as out:
        out.write("+ " + (f"QHARNESS_SIMULATE={simulate} " if simulate else "") + " ".join(cmd))
        out.write("\n")
        out.flush()
        with _CHILDREN_LOCK:
            if _STOP.is_set():
                raise KeyboardInterrupt
            child = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            _CHILDREN.add(child)
        try:
            status = child.wait(timeout=limit_s)
            note = ""
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            status = child.wait()
            note = f"ran past {limit_s:.0f} s and was stopped"
        finally:
            _CHILDREN.discard(child)
    outcome = junit_outcome(junit)
    return RunResult(
        label=label,
        status=status,
        seconds=round(time.monotonic() - start, 1),
        failed=outcome.failed,
        counts=outcome.counts,
        reached=reached(overlay),
        note=note,
        log=str(log),
        xfailed=outcome.xfailed,
        passed=outcome.passed,
        findings=outcome.findings,
    )


# Runs the pytest command after asking Linux to SIGKILL it when the runner dies, however
# the runner dies (prctl PR_SET_PDEATHSIG): no orphan keeps using a cleared overlay.
DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys; "
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL); "
    "os.getppid() == 1 and os._exit(137); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)

_PLUGINS: dict[Path, str] = {}


def stage_plugins(python: Path) -> str:
    """Whether the venv has pytest-xdist (the corpus runs each selection in one process)."""
    if python not in _PLUGINS:
        probe = subprocess.run(
            [str(python), "-c", "import xdist"], capture_output=True, text=True, check=False
        )
        _PLUGINS[python] = "xdist" if probe.returncode == 0 else ""
    return _PLUGINS[python]


# --- one entry -----------------------------------------------------------------------


@dataclass
class EntryResult:
    """An entry's verdict, with the runs behind it."""

    id: str
    project: str
    bug_class: str
    kind: str
    stage: str
    upstream: str
    outcome: str  # caught | missed | broken | not-runnable
    reason: str = ""
    catching: list[str] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)
    seconds: float = 0.0


@contextmanager
def scratch_slot(scratch: Path, slot: int) -> Iterator[Path]:
    """An exclusive scratch directory (an flock, released by the kernel even on SIGKILL)."""
    path = scratch / f"slot-{slot}"
    path.mkdir(parents=True, exist_ok=True)
    with (path / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield path
        finally:
            shutil.rmtree(path / "overlay", ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


XPASS_STRICT = "[XPASS(strict)]"


def real_failures(run: RunResult) -> list[str]:
    """A run's failing checks, less strict xpasses (a known finding that stopped showing)."""
    return [f for f in run.failed if XPASS_STRICT not in f]


def partly_cleared(
    fault_runs: list[RunResult], control_runs: list[RunResult]
) -> set[tuple[str, str]]:
    """Tests that xfail on both sides where the control names fewer known findings: the
    harness names each finding whose rule explains a case (joined by " + "), so a fix that
    clears one of several findings of a case shows as a finding gone from its xfail."""
    on_fault = {t: f for run in fault_runs for t, f in run.findings.items()}
    on_control = {t: f for run in control_runs for t, f in run.findings.items()}
    out = set()
    for test, named in on_fault.items():
        fault_set = set(filter(None, named.split(" + ")))
        control_set = set(filter(None, on_control.get(test, "").split(" + ")))
        if test in on_control and control_set and control_set < fault_set:
            gone = len(fault_set - control_set)
            out.add((test, f"{gone} of its {len(fault_set)} findings cleared by the control"))
    return out


def judge(fault_runs: list[RunResult], control_runs: list[RunResult]) -> tuple[str, str, list[str]]:
    """caught / missed / broken, why, and the catching checks, from the two sides' runs.

    A check that fails with the fault (not an xfail) catches it. So does a **known
    finding**: a test that xfails on the fault (the harness already names this bug) and
    passes on the control (the forward-ported fix), strict or not."""
    for run in control_runs:
        if run.note or run.status not in (0, 1) or real_failures(run):
            why = run.note or f"pytest exit {run.status}"
            return "broken", f"control {run.label} did not pass ({why})", []
        if run.status == 1 and not run.failed:
            return "broken", f"control {run.label}: pytest exit 1 without a failing test", []
    for run in fault_runs:
        if run.note:
            return "broken", f"fault {run.label} {run.note}", []
        if run.status not in (0, 1):
            return "broken", f"fault {run.label}: pytest exit {run.status}", []
    caught = sorted({f for run in fault_runs for f in real_failures(run)})
    if caught:
        return "caught", "", caught
    cleared = {t for run in control_runs for t in run.passed}
    cleared |= {f.split(": ")[0] for run in control_runs for f in run.failed if XPASS_STRICT in f}
    known = sorted({t for run in fault_runs for t in run.xfailed} & cleared)
    if known:
        return (
            "caught",
            "a known finding names it: xfail with the fault, passes with the fix",
            [f"{t}: known finding (xfail), cleared by the control" for t in known],
        )
    partly = sorted(partly_cleared(fault_runs, control_runs))
    if partly:
        return (
            "caught",
            "a known finding names it: the fix clears that finding, others still xfail",
            [f"{t}: known finding (xfail), {why}" for t, why in partly],
        )
    if not any(run.reached for run in fault_runs):
        return "missed", "the selection never imported the faulty code", []
    return "missed", "every check passed with the fault", []


def run_entry(
    entry: Entry,
    stage: Stage,
    engines: Path,
    out: Path,
    slot_dir: Path,
    limit_s: float,
) -> EntryResult:
    """Fault and control runs of one entry on every arch it names."""
    meta = entry.meta
    result = EntryResult(
        id=entry.id,
        project=entry.text("project"),
        bug_class=entry.text("bug_class"),
        kind=entry.text("kind"),
        stage=stage.name,
        upstream=entry.text("upstream"),
        outcome="not-runnable",
    )
    if not entry.runnable:
        result.reason = entry.text("needs")
        return result
    start = time.monotonic()
    venv = engines / stage.venv
    python = venv / "bin" / "python"
    if not python.exists():
        result.outcome, result.reason = "broken", f"no engine venv {venv}"
        return result
    site = site_packages(venv)
    logs = out / "logs" / entry.id
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    arches = [str(meta["simulate"])] if meta.get("simulate") else list(stage.simulate) or [""]
    fault_patch = entry.fault
    control_patch = entry.control
    sides: dict[str, list[RunResult]] = {"fault": [], "control": []}
    for side, patch in (("fault", fault_patch), ("control", control_patch)):
        try:
            overlay = build_overlay(site, slot_dir / "overlay", patch)
        except CorpusError as exc:
            result.outcome, result.reason = "broken", f"{side}: {exc}"
            result.runs = sides["fault"] + sides["control"]
            return result
        for arch in arches:
            label = side + (f"-{arch.split(':')[-1]}" if arch else "")
            key = (stage.name, tuple(entry.meta.get("files") or ()), entry.text("keyword"), arch)
            shared = _CONTROLS.get((*key, patch.read_text() if patch else ""))
            if side == "control" and shared is not None:
                sides[side].append(shared)  # the same selection on the same code: run once
                continue
            for old in overlay.root.glob("reached.*"):
                old.unlink()
            run = run_pytest(stage, entry, overlay, arch, logs, label, python, limit_s)
            if side == "control":
                _CONTROLS[(*key, patch.read_text() if patch else "")] = run
            if side == "fault" and fault_patch is None:
                run.reached = True  # a present bug is the installed code: always reached
            sides[side].append(run)
    result.runs = sides["fault"] + sides["control"]
    result.outcome, result.reason, result.catching = judge(sides["fault"], sides["control"])
    result.seconds = round(time.monotonic() - start, 1)
    return result


# --- commands ------------------------------------------------------------------------


def fresh_out(out: Path) -> None:
    """Empty a previous corpus run directory (only one of ours), or make one."""
    if out.exists():
        if not (out / RUN_MARKER).is_file():
            raise CorpusError(f"{out} exists and is not a corpus run directory; pass another --out")
        shutil.rmtree(out / "logs", ignore_errors=True)
        (out / "results.json").unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / RUN_MARKER).write_text("written by scripts/corpus.py\n")


def clear_stale_scratch(scratch: Path) -> None:
    """Remove overlays a killed runner left behind (slots nobody holds)."""
    if not scratch.is_dir():
        return
    for slot in scratch.glob("slot-*"):
        lock_path = slot / "lock"
        if not lock_path.exists():
            shutil.rmtree(slot, ignore_errors=True)
            continue
        with lock_path.open("w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another runner holds it
            shutil.rmtree(slot / "overlay", ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


def declared_entry_points(pyproject: Path) -> dict[str, dict[str, str]]:
    """``[project.entry-points]`` (and the scripts) of a pyproject.toml, group -> name ->
    object, as an install records them."""
    project = tomllib.loads(pyproject.read_text()).get("project", {})
    groups = {g: dict(eps) for g, eps in project.get("entry-points", {}).items()}
    for table, group in (("scripts", "console_scripts"), ("gui-scripts", "gui_scripts")):
        if project.get(table):
            groups[group] = dict(project[table])
    return groups


def recorded_entry_points(egg_info: Path) -> dict[str, dict[str, str]]:
    """The entry points an ``*.egg-info`` folder advertises (its entry_points.txt)."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    text = egg_info / "entry_points.txt"
    if text.is_file():
        parser.read_string(text.read_text())
    return {g: {k: v.strip() for k, v in parser[g].items()} for g in parser.sections()}


def stale_metadata(folder: Path) -> list[str]:
    """``*.egg-info`` folders in ``folder`` whose entry points differ from its pyproject.

    The runner puts the checkout and the adapter first on PYTHONPATH, so package metadata
    found there wins over the venv's: an egg-info left by an older editable install would
    register the old paths and quantizers, and the run would test something else."""
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return []
    declared = declared_entry_points(pyproject)
    return [
        f"{egg} advertises other entry points than {pyproject} (left by an older install); "
        f"delete it, or reinstall: <venv>/bin/python -m pip install --no-deps -e {folder}"
        for egg in sorted(folder.glob("*.egg-info"))
        if recorded_entry_points(egg) != declared
    ]


def command_run(args: argparse.Namespace, stages: dict[str, Stage]) -> int:
    entries = load_corpus(args.corpus, stages)
    known = {e.id for e in entries}
    unknown = [i for i in args.ids if i not in known]
    if unknown:
        raise CorpusError(f"unknown entries {unknown}; `corpus.py list` shows them")
    chosen = [e for e in entries if not args.ids or e.id in args.ids]
    if args.runnable_only:
        chosen = [e for e in chosen if e.runnable]
    if not chosen:
        raise CorpusError("no entries to run")
    stale = [
        problem
        for folder in sorted({ROOT, *(ROOT / stages[e.text("stage")].adapter for e in chosen)})
        for problem in stale_metadata(folder)
    ]
    if stale:
        raise CorpusError("; ".join(stale))
    fresh_out(args.out)
    clear_stale_scratch(args.scratch)
    started = time.time()

    def one(job: tuple[int, Entry]) -> EntryResult:
        index, entry = job
        if _STOP.is_set():
            raise KeyboardInterrupt
        with scratch_slot(args.scratch, index % args.jobs) as slot_dir:
            res = run_entry(
                entry, stages[entry.text("stage")], args.engines, args.out, slot_dir, args.limit
            )
        checks = f": {res.catching[0]}" if res.catching else ""
        print(f"{res.outcome:12} {res.id} ({res.seconds:.0f} s){checks} {res.reason}", flush=True)
        return res

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, enumerate(chosen)))
    payload = {
        "schema": 1,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "commit": git_commit(),
        "entries": [written(r) for r in results],
    }
    (args.out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
    tally = {k: sum(r.outcome == k for r in results) for k in OUTCOMES}
    print(
        " ".join(f"{k} {v}" for k, v in tally.items())
        + f"; {payload['seconds']:.0f} s; results in {args.out / 'results.json'}"
    )
    return EXIT_FAILED if tally["broken"] else EXIT_OK


OUTCOMES = ("caught", "missed", "broken", "not-runnable")


def written(result: EntryResult) -> dict[str, object]:
    """An entry's result as results.json holds it (no per-test pass lists)."""
    data = asdict(result)
    for run in data["runs"]:
        run.pop("passed", None)
    return data


def git_commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def command_list(args: argparse.Namespace, stages: dict[str, Stage]) -> int:
    for entry in load_corpus(args.corpus, stages):
        flag = "runnable" if entry.runnable else "gpu-only"
        print(f"{entry.id:48} {entry.text('project'):18} {entry.text('kind'):8} {flag}")
    return EXIT_OK


def command_check(args: argparse.Namespace, stages: dict[str, Stage]) -> int:
    """Validate every entry, and that every patch applies to the installed engine."""
    entries = load_corpus(args.corpus, stages)
    bad = 0
    for entry in entries:
        stage = stages[entry.text("stage")]
        venv = args.engines / stage.venv
        if not venv.exists():
            print(f"unchecked    {entry.id}: no engine venv {venv}")
            continue
        with scratch_slot(args.scratch, 0) as slot_dir:
            for patch in (entry.fault, entry.control):  # None: the installed code
                if patch is None:
                    continue
                try:
                    build_overlay(site_packages(venv), slot_dir / "overlay", patch)
                except CorpusError as exc:
                    bad += 1
                    print(f"broken       {entry.id}: {exc}")
    print(f"{len(entries)} entries, {bad} patches that do not apply")
    return EXIT_FAILED if bad else EXIT_OK


def rate(results: list[dict[str, object]]) -> str:
    runnable = [r for r in results if r["outcome"] in ("caught", "missed")]
    caught = sum(r["outcome"] == "caught" for r in runnable)
    return f"{caught}/{len(runnable)}" + (
        f" ({100 * caught / len(runnable):.0f}%)" if runnable else ""
    )


def command_docs(args: argparse.Namespace, stages: dict[str, Stage]) -> int:
    """docs/CORPUS.md from a run's results (and the baseline run's, kept beside it)."""
    entries = {e.id: e for e in load_corpus(args.corpus, stages)}
    run = json.loads((args.run / "results.json").read_text())
    baseline = json.loads(args.baseline.read_text()) if args.baseline.is_file() else None
    base_outcome = {r["id"]: r["outcome"] for r in baseline["entries"]} if baseline else {}
    results = run["entries"]
    lines = [
        "# The real-bug corpus: upstream quantization bugs put back, and what caught them",
        "",
        "Generated by `python3 scripts/corpus.py docs` from a run of",
        "`python3 scripts/corpus.py run` (format and rules: corpus/README.md). Each entry is a",
        "bug that shipped upstream, put back into the installed engine in a scratch overlay;",
        "the engine stage's own selection runs with the fault and on the control.",
        "",
        f"- This run: commit {run['commit']}, {run['started']}, {run['seconds'] / 60:.0f} min;"
        f" caught {rate(results)} of the runnable entries.",
    ]
    if baseline:
        lines.append(
            f"- Baseline (before the teeth round): commit {baseline['commit']},"
            f" {baseline['started']}: caught {rate(baseline['entries'])}."
        )
    lines += ["", "## Catch rate per project", "", "| project | caught |", "|---|---|"]
    for project in PROJECTS:
        mine = [r for r in results if r["project"] == project]
        if mine:
            lines.append(f"| {project} | {rate(mine)} |")
    lines += ["", "## Catch rate per bug class", "", "| class | caught |", "|---|---|"]
    for name in BUG_CLASSES:
        mine = [r for r in results if r["bug_class"] == name]
        if mine:
            lines.append(f"| {name} ({BUG_CLASSES[name]}) | {rate(mine)} |")
    lines += [
        "",
        "## Entries",
        "",
        "| entry | upstream | kind | stage | baseline | now | caught by |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        by = "; ".join(f"`{c.split(': ')[0]}`" for c in r["catching"][:2])
        more = len(r["catching"]) - 2
        by += f" (+{more})" if more > 0 else ""
        why = r["reason"] if r["outcome"] != "caught" else ""
        lines.append(
            f"| {r['id']} | {r['upstream']} | {r['kind']} | {r['stage']} |"
            f" {base_outcome.get(r['id'], '-')} | {r['outcome']} | {by or why} |"
        )
    misses = [r for r in results if r["outcome"] == "missed"]
    lines += ["", "## Misses: what it would take", ""]
    for r in misses:
        meta = entries[r["id"]].meta if r["id"] in entries else {}
        would = str(meta.get("would_catch", "")) or "(not yet explained)"
        lines.append(f"- **{r['id']}** ({r['bug_class']}): {would}")
    if not misses:
        lines.append("None.")
    gpu = [r for r in results if r["outcome"] == "not-runnable"]
    lines += ["", "## Kept for a GPU runner", ""]
    lines += [f"- **{r['id']}**: {r['reason']}" for r in gpu] or ["None."]
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}")
    return EXIT_OK


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="corpus.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the corpus folder")
    parser.add_argument("--engines", type=Path, default=ROOT / ".engines", help="engine venvs")
    parser.add_argument("--scratch", type=Path, default=SCRATCH, help="overlays live here")
    parser.add_argument(
        "--stages", type=Path, default=None, help="a JSON stage table instead of engine.py's"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one line per entry")
    sub.add_parser("check", help="validate entries; every patch applies to its engine")
    run = sub.add_parser("run", help="run entries (all when no id is given)")
    run.add_argument("ids", nargs="*")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT)
    run.add_argument("--jobs", type=int, default=1, help="entries run side by side")
    run.add_argument("--runnable-only", action="store_true")
    run.add_argument("--limit", type=float, default=RUN_LIMIT_S, help=argparse.SUPPRESS)
    docs = sub.add_parser("docs", help="write docs/CORPUS.md from a run")
    docs.add_argument("--run", type=Path, default=DEFAULT_OUT)
    docs.add_argument("--baseline", type=Path, default=CORPUS / "results" / "baseline.json")
    docs.add_argument("--output", type=Path, default=ROOT / "docs" / "CORPUS.md")
    args = parser.parse_args(argv)
    if getattr(args, "jobs", 1) < 1:
        parser.error("--jobs must be at least 1")
    return args


COMMANDS = {"run": command_run, "list": command_list, "check": command_check, "docs": command_docs}


def stop_children(signum: int, _frame: object) -> None:
    """On SIGINT/SIGTERM: stop every pytest run whole, then leave (the scratch is cleared)."""
    with _CHILDREN_LOCK:
        _STOP.set()
        for child in list(_CHILDREN):
            with suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, stop_children)
    signal.signal(signal.SIGINT, stop_children)
    try:
        return COMMANDS[args.command](args, engine_stages(args.stages))
    except CorpusError as exc:
        print(f"corpus.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        clear_stale_scratch(args.scratch)
        print("corpus.py: interrupted; the engines were never written", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
