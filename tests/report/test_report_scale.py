"""The fleet report's linear algorithms give what the per-group pandas code gave.

The matrix, the baselines and the failure streaks used to be computed group by group with
pandas (a cost per platform that made a 10,000-runner report take hours); they are now one
pass over the rows. The reference implementations below are that earlier code, kept here
verbatim in behaviour, and both must agree on a varied fleet: several platforms and nights,
reference and native paths, two suites, emulated kernels, skips with competing reasons,
failure streaks that start in different nights, and a run without a date.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd

from harness.report.model.digest import RunDigest
from harness.report.model.identity import keyed_by_runner
from harness.report.model.matrix import Cell, SuiteCount
from harness.report.model.nightly import build_report
from harness.report.model.regress import BAD, EMULATED_KERNEL, REFERENCE_PATHS
from harness.report.reading.frame import typed
from harness.report.reading.results import SCHEMA
from harness.report.reading.runs import load_run, open_history

PLATFORMS = 7
NIGHTS = 4


# ------------------------------------------------------------ reference (per-group pandas)
def _ref_suite_counts(rows: pd.DataFrame, non_reference: bool) -> tuple[SuiteCount, ...]:
    counts = []
    for suite, group in rows.groupby(rows["suite"].fillna("other"), sort=True):
        outcomes = group["outcome"]
        failed = int(outcomes.isin(BAD).sum())
        skipped = int((outcomes == "skipped").sum())
        passed = len(group) - failed - skipped
        emulated = bool((group["kernel"] == EMULATED_KERNEL).fillna(False).all())
        counts.append(
            SuiteCount(
                str(suite), passed, failed, skipped, passed > 0 and not (non_reference and emulated)
            )
        )
    return tuple(counts)


def _ref_cell(rows: pd.DataFrame, reference_ran: bool) -> Cell:
    outcomes = rows["outcome"]
    failed = int(outcomes.isin(BAD).sum())
    skipped = int((outcomes == "skipped").sum())
    passed = len(rows) - failed - skipped
    reasons = rows.loc[outcomes == "skipped", "reason"].dropna()
    reason = str(reasons.value_counts().index[0]) if len(reasons) else ""
    non_reference = bool(
        rows["path"].notna().all() and not rows["path"].isin(REFERENCE_PATHS).any()
    )
    emulated_kernel = bool((rows["kernel"] == EMULATED_KERNEL).fillna(False).all())
    suites = _ref_suite_counts(rows, non_reference)
    if failed:
        return Cell("fail", passed, failed, skipped, reason, suites)
    if non_reference and reference_ran and (passed == 0 or emulated_kernel):
        return Cell(
            "emulated-only", passed, failed, skipped, reason or "runs the emulated kernel", suites
        )
    if passed == 0:
        return Cell("skipped", passed, failed, skipped, reason, suites)
    not_run = [s for s in suites if not s.ran]
    if not_run:
        why = "; ".join(s.text for s in not_run) + (f" ({reason})" if reason else "")
        return Cell("partial", passed, failed, skipped, why, suites)
    return Cell("pass", passed, failed, skipped, reason, suites)


def _ref_matrix(frame: pd.DataFrame) -> dict[tuple[str, str], dict[str, Cell]]:
    rows = frame[frame["scheme"].notna() & frame["path"].notna() & (frame["suite"] != "benchmark")]
    ran = rows[rows["outcome"] != "skipped"]
    ref = ran[ran["path"].isin(REFERENCE_PATHS)]
    reference_ran = set(zip(ref["scheme"], ref["platform"], strict=True))
    matrix: dict[tuple[str, str], dict[str, Cell]] = {}
    for (scheme, path, platform), group in rows.groupby(
        ["scheme", "path", "platform"], sort=True, observed=True
    ):
        matrix.setdefault((str(scheme), str(path)), {})[str(platform)] = _ref_cell(
            group, (scheme, platform) in reference_ran
        )
    return matrix


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["created", "run_id"], kind="stable")


def _ref_last_run_before(history: pd.DataFrame, platform: str, run: RunDigest) -> str | None:
    same = history[(history["platform"] == platform) & (history["run_id"] != run.run_id)]
    same = same[same["created"] <= run.created]
    return None if same.empty else str(_order(same.drop_duplicates("run_id")).iloc[-1]["run_id"])


def _ref_failing_since(history: pd.DataFrame, failures: pd.DataFrame) -> list[str]:
    since = []
    wanted = history[history["nodeid"].isin(set(failures["nodeid"]))]
    by_test = {key: _order(g) for key, g in wanted.groupby(["platform", "nodeid"], sort=False)}
    for _, row in failures.iterrows():
        rows = by_test.get((row["platform"], row["nodeid"]))
        first = str(row["run_id"])
        if rows is not None:
            rows = rows[rows["created"] <= row["created"]]
            for run_id, outcome in zip(
                rows["run_id"].tolist()[::-1], rows["outcome"].tolist()[::-1], strict=True
            ):
                if outcome not in BAD:
                    break
                first = str(run_id)
        since.append(first)
    return since


# ------------------------------------------------------------------------- the fleet
def _record(
    rng: random.Random, platform: int, scheme: str, path: str, suite: str, i: int
) -> dict[str, Any]:
    if (platform % 3, suite, scheme, path, i) == (1, "linear", "fp8_a", "emulated", 0):
        outcome = "failed"  # fails every night: a streak older than the reported run
    elif path == "native" and platform % 3 == 0:
        outcome = "skipped"  # no native kernel on this runner: emulated-only
    elif platform % 3 == 1:
        outcome = rng.choice(["passed"] * 12 + ["failed", "xfailed"])
    else:
        outcome = rng.choice(["passed", "passed", "skipped"])
    reason = rng.choice(["no kernel", "no fp8", None]) if outcome == "skipped" else None
    metrics = {"sqnr_db": rng.uniform(15, 40), "kernel": rng.choice(["emulated", "native"])}
    return {
        "nodeid": f"suites/test_{suite}.py::test_{suite}[{scheme}-{path}-{i}]",
        "suite": suite, "scheme": scheme, "path": path, "shape": "16x16x256",
        "outcome": outcome, "reason": reason, "duration_s": 0.01,
        "metrics": {} if outcome == "skipped" else metrics,
    }  # fmt: skip


def _doc(rng: random.Random, platform: int, night: int) -> dict[str, Any]:
    records = [
        _record(rng, platform, scheme, path, suite, i)
        for scheme in ("fp8_a", "mxfp4_b")
        for path in ("emulated", "native")
        for suite in ("linear", "moe")
        for i in range(3)
    ]
    created = None if (platform, night) == (2, 1) else f"2026-11-{1 + night:02d}T00:00:00Z"
    return {
        "schema": SCHEMA, "created": created, "exitstatus": 0, "partial": False,
        "platform": {"device": "cuda", "arch": f"sm_{80 + platform % 3}", "name": "gpu",
                     "torch_version": "2.13"},
        "capabilities": {}, "versions": {"qharness": "0.1.0", "torch": "2.13"},
        "runner": {"key": f"rack{platform}", "label": f"rack{platform}",
                   "host": f"{platform:04x}"},
        "summary": {"total": len(records), "outcomes": {}, "skip_reasons": {}}, "records": records,
    }  # fmt: skip


def _fleet(root: Path) -> tuple[list[Path], Path]:
    rng = random.Random(25)
    runs = []
    for night in range(NIGHTS):
        for platform in range(PLATFORMS):
            run = root / f"202611{1 + night:02d}T0000Z-p{platform}"
            run.mkdir(parents=True)
            (run / "results.json").write_text(json.dumps(_doc(rng, platform, night)))
            runs.append(run)
    return runs, root / "history"


def test_fleet_report_agrees_with_the_per_group_code(tmp_path: Path) -> None:
    runs, history_dir = _fleet(tmp_path)
    history = open_history(history_dir)
    from harness.report.reading.runs import add_runs

    add_runs(history, runs[: -2 * PLATFORMS])
    # the last two nights are given: the newest of each runner is reported, the rest is history
    given = runs[-2 * PLATFORMS :]
    report = build_report(given, history)

    # the reference reads every row: the history's and the given runs', keyed by runner
    loaded = [load_run(r) for r in given]
    every = keyed_by_runner(typed(pd.concat([history.load(), *(r.frame for r in loaded)])))
    every = every.drop_duplicates(["run_id", "nodeid"], keep="last")
    reported = {r.run_id for r in report.runs.values()}
    frame = every[every["run_id"].isin(reported)].reset_index(drop=True)

    assert len(report.platforms) == PLATFORMS
    assert report.matrix == _ref_matrix(frame)
    verdicts = {c.verdict for cells in report.matrix.values() for c in cells.values()}
    assert {"fail", "pass", "emulated-only"} <= verdicts, verdicts  # a varied fleet

    for platform, run in report.runs.items():
        assert report.baselines[platform] == _ref_last_run_before(every, platform, run)
    order = {platform: i for i, platform in enumerate(report.runs)}
    failing = frame[frame["outcome"].isin(BAD)]
    failing = failing.sort_values("platform", key=lambda p: p.map(order), kind="stable")
    assert [f.since for f in report.failures] == _ref_failing_since(every, failing)
    # some streaks began before the reported night: the comparison covers history
    assert any(not f.is_new for f in report.failures)
