"""Runner identity: two runners of one architecture with different labels are two report
columns, each compared with its own history; runs that share a key are named in the report;
the label reaches the results file from the CLI or the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.report.model.nightly import build_report
from harness.report.reading.results import read_results, write_results
from harness.report.reading.runs import add_runs, open_history
from tests.fleet.night import record, results_doc, write_run

NIGHT1, NIGHT2 = "2026-12-01T03:00:00Z", "2026-12-02T03:00:00Z"


def _night(reports: Path, day: str, label: str | None, host: str, sqnr: float) -> Path:
    created = NIGHT1 if day == "1" else NIGHT2
    doc = results_doc("gfx942", created, [record("fp8_per_tensor", "native", sqnr=sqnr)],
                      label=label, host=host)  # fmt: skip
    return write_run(reports, f"2026120{day}T0300Z-gfx942-{host}", doc)


def test_two_labelled_runners_of_one_arch_are_two_columns_with_own_baselines(
    tmp_path: Path,
) -> None:
    history = open_history(tmp_path / "history")
    # rack1 drops 10 dB on night 2; rack2 is steady but sits 10 dB lower all along: compared
    # with each other instead of with themselves, rack1's drop would hide.
    old = [
        _night(tmp_path, "1", "rack1", "aaaa", 40.0),
        _night(tmp_path, "1", "rack2", "bbbb", 30.0),
    ]
    add_runs(history, old)
    new = [
        _night(tmp_path, "2", "rack1", "aaaa", 30.0),
        _night(tmp_path, "2", "rack2", "bbbb", 30.0),
    ]
    report = build_report(new, history)
    assert report.platforms == ["gfx942@rack1", "gfx942@rack2"]
    assert report.baselines == {
        "gfx942@rack1": "20261201T0300Z-gfx942-aaaa",
        "gfx942@rack2": "20261201T0300Z-gfx942-bbbb",
    }
    assert [(r.platform, r.kind) for r in report.regressions] == [("gfx942@rack1", "SQNR down")]
    assert not [n for n in report.notes if "share" in n]


def test_unlabelled_runners_sharing_a_key_are_named(tmp_path: Path) -> None:
    runs = [_night(tmp_path, "2", None, "aaaa", 30.0), _night(tmp_path, "1", None, "bbbb", 30.0)]
    report = build_report(runs)
    (note,) = [n for n in report.notes if "share the runner key" in n]
    assert "'gfx942'" in note
    assert "--runner-label" in note


def test_baseline_from_another_host_or_stack_is_named(tmp_path: Path) -> None:
    history = open_history(tmp_path / "history")
    add_runs(history, [_night(tmp_path, "1", None, "bbbb", 30.0)])
    report = build_report([_night(tmp_path, "2", None, "aaaa", 30.0)], history)
    assert any("another host" in n for n in report.notes)


def test_label_from_the_environment_reaches_the_results_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QHARNESS_RUNNER", "mi300x-rack2")
    write_results(tmp_path / "r.json", [record("fp8_per_tensor", "native")], exitstatus=0)
    runner = read_results(tmp_path / "r.json")["runner"]
    assert runner["label"] == "mi300x-rack2"
    assert runner["key"] == "cpu@mi300x-rack2"
    assert {"torch", "cuda", "hip", "driver", "host"} <= set(runner)


def test_runner_label_option_is_checked_and_passed_to_pytest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, str] = {}

    def fake_pytest(cmd: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> int:
        seen.update(extra_env or {})
        return 5

    monkeypatch.setattr("harness.cli.run.run_pytest", fake_pytest)
    monkeypatch.delenv("QHARNESS_RUNNER", raising=False)
    reports = str(tmp_path / "reports")
    main(["run", "--workers", "0", "--reports-dir", reports, "--runner-label", "h100-a"])
    assert seen["QHARNESS_RUNNER"] == "h100-a"
    assert main(["run", "--reports-dir", reports, "--runner-label", "bad label!"]) == 2
    assert "runner label" in capsys.readouterr().err
    assert json.dumps(seen)  # the plan's environment is plain strings


@pytest.mark.parametrize("name", ["nightly-rocm.yml", "nightly-cuda.yml"])
def test_examples_label_each_runner(name: str) -> None:
    import yaml

    from tests.conftest import REPO_ROOT

    doc = yaml.safe_load((REPO_ROOT / "examples" / name).read_text())
    (job,) = doc["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("id") == "run"]
    assert step["env"]["QHARNESS_RUNNER"] == "${{ runner.name }}"
