"""Every `python -m harness ...` command README.md and docs/*.md show works as written.

Each is parsed by the real parser; the cheap ones are run (in this process, against a copy
of the golden store or a generated results file where they would write); the expensive ones
run a narrowed variant (collect-only, one golden entry, integrity-only check) or, where even
that is a full run, say why they are parsed only. A new documented command is picked up
automatically."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.errors import EXIT_OK

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
COMMAND = re.compile(r"python3? -m harness(?![.\w])(?P<args>[^`\n#]*)")
FENCE = re.compile(r"```(?:bash|sh|console)\n(?P<body>.*?)```", re.S)
# Placeholders the docs use, and a real value for each.
PLACEHOLDERS = {"<name>": "fp8_per_tensor", "OLD.json": "{baseline}"}
SYNTAX_ONLY = {"<command>"}  # a title showing the syntax, not a command


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) for every command in fenced bash blocks and inline code spans."""
    found: dict[tuple[str, ...], str] = {}
    for doc in DOCUMENTS:
        text = doc.read_text()
        spans = [m.group("body") for m in FENCE.finditer(text)]
        spans += re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
        for span in spans:
            for match in COMMAND.finditer(span):
                args = match.group("args").strip()
                if any(p in args for p in SYNTAX_ONLY):
                    continue
                for placeholder, value in PLACEHOLDERS.items():
                    args = args.replace(placeholder, value)
                argv = tuple(shlex.split(args))
                line = text[: text.find(match.group(0))].count("\n") + 1
                found.setdefault(argv, f"{doc.relative_to(REPO_ROOT)}:{line}")
    return [(where, list(argv)) for argv, where in found.items()]


COMMANDS = documented_commands()
IDS = [f"{where} {' '.join(argv)}" for where, argv in COMMANDS]


def test_the_docs_show_commands() -> None:
    shown = {argv[0] for _, argv in COMMANDS if argv}
    assert {"run", "selftest", "golden", "report", "platform", "schemes"} <= shown


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=IDS)
def test_documented_command_parses(where: str, argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert callable(args.func), where


def _results_file(path: Path) -> Path:
    from harness.report.reading.results import write_results

    write_results(
        path,
        [
            {
                "nodeid": "t::a",
                "outcome": "passed",
                "reason": None,
                "duration_s": 0.1,
                "metrics": {"sqnr_db": 30.0},
            }
        ],
        exitstatus=0,
    )
    return path


def is_full_run(argv: list[str]) -> bool:
    """A run of every suite (or every check): parsed here, run by CI's own `selftest`."""
    return argv[0] == "selftest" or (argv[0] == "run" and "fp8_per_tensor" not in argv)


def cheap_variant(argv: list[str], tmp: Path) -> list[str]:
    """The argv to run for a documented command that is not a full run."""
    command = argv[0]
    if command in ("platform", "schemes"):
        return argv
    if command == "golden" and argv[1] == "check":
        return [*argv, "--no-recompute"]  # recomputing all goldens is `selftest`'s job
    if command == "golden" and argv[1] == "refresh":
        root = tmp / "golden"
        shutil.copytree(REPO_ROOT / "golden", root)
        only = argv[argv.index("--only") + 1] if "--only" in argv else "*"
        entry = next(
            e
            for e in json.loads((root / "MANIFEST.json").read_text())["entries"]
            if fnmatch.fnmatch(e, only)
        )
        return ["golden", "refresh", "--root", str(root), "--only", entry]
    if command in ("history", "report") and _names_runs(argv):
        return _with_tmp_paths(argv, tmp)
    if command == "repro":
        return ["repro", _bundle(tmp), *argv[2:]]  # the documented bundle, made here
    if command == "report":
        results = _results_file(tmp / "results.json")
        baseline = str(_results_file(tmp / "baseline.json"))
        return [
            "report",
            "--results",
            str(results),
            *(a.format(baseline=baseline) for a in argv[1:]),
        ]
    if command == "run" and "-k" in argv and argv[argv.index("-k") + 1] == "fp8_per_tensor":
        # The reported example: its -k must reach pytest and select tests (collect only).
        # Its run directory goes to tmp, not into the checkout's reports/.
        out = ["--out", str(tmp / "r.json"), "--reports-dir", str(tmp / "reports")]
        return ["run", "--workers", "0", *out, *argv[1:], "--co"]
    raise AssertionError(f"no cheap way to run documented command {argv}: add one here")


PATH_OPTIONS = {"--history": "history", "--html": "page.html", "--summary": "summary.md"}


def _names_runs(argv: list[str]) -> bool:
    """history/report commands that name run directories or a history."""
    return argv[0] == "history" or "--history" in argv or any(a.endswith("latest") for a in argv)


def _with_tmp_paths(argv: list[str], tmp: Path) -> list[str]:
    """The command with each run replaced by a generated run directory (added to the
    history first) and each output path moved under ``tmp``."""
    run = tmp / "runs" / "20261201T0300Z-cpu-0000" / "results.json"
    run.parent.mkdir(parents=True, exist_ok=True)
    _results_file(run)
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in PATH_OPTIONS:
            out += [arg, str(tmp / PATH_OPTIONS[arg])]
            next(args)
        elif arg.endswith("latest"):
            out.append(str(run.parent))
        else:
            out.append(arg)
    assert main(["history", "add", str(run.parent), "--history", str(tmp / "history")]) == 0
    return out


def _bundle(tmp: Path) -> str:
    """A real repro bundle: a passing linear case through the emulated path."""
    from harness.core.schemes import get_scheme
    from harness.linear.cases import LINEAR_SHAPES, OUT_DTYPES, load_linear_case
    from harness.linear.checks import expected_output
    from harness.linear.paths import get_path
    from harness.linear.repro import linear_bundle_tensors
    from harness.paths.base import Numerics
    from harness.store.golden_store import GoldenStore
    from harness.store.repro import Bundle, write_bundle

    scheme, shape = get_scheme("fp8_per_tensor"), LINEAR_SHAPES[0]
    loaded = load_linear_case(GoldenStore().load("linear/fp8_per_tensor"), scheme.name, shape, True)
    y = get_path("emulated").forward(loaded.layer, loaded.x, OUT_DTYPES["bf16"])
    expected = expected_output(loaded, scheme, True, Numerics(OUT_DTYPES["bf16"]))
    case = {"scheme": scheme.name, "path": "emulated", "out_dtype": "bf16"}
    tensors = linear_bundle_tensors(loaded.layer, loaded.x, y, expected)
    return str(write_bundle(tmp, "t::case", Bundle(tensors, {"kind": "linear", "case": case})))


RUNNABLE = [(w, a) for w, a in COMMANDS if not is_full_run(a)]


def test_only_full_runs_are_left_to_ci() -> None:
    full = [argv for _, argv in COMMANDS if is_full_run(argv)]
    assert all(argv[0] in ("run", "selftest") for argv in full)
    assert len(RUNNABLE) >= len(COMMANDS) // 2, "most documented commands are run here"


@pytest.mark.parametrize(
    ("where", "argv"), RUNNABLE, ids=[f"{w} {' '.join(a)}" for w, a in RUNNABLE]
)
def test_documented_command_runs(where: str, argv: list[str], tmp_path: Path, capsys) -> None:
    variant = cheap_variant(argv, tmp_path)
    status = main(variant)
    out, err = capsys.readouterr()
    assert status == EXIT_OK, f"{where}: {' '.join(variant)} -> {status}\n{err[-2000:]}"
    if variant[:2] == ["golden", "refresh"]:
        assert "1 unchanged" in out, out  # committed goldens are reproduced byte for byte
