"""The plugin is inert in a project that did not ask for it, and active when asked.

`pytest11` plugins load into every pytest run of an environment, so a foreign project
with qharness installed must see no header line, no user_properties in its JUnit XML, no
summary section, and no torch import; each opt-in switches all of that on.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

FOREIGN_TESTS = """
import pytest

def test_plain():
    assert 1 + 1 == 2

def test_skipped():
    pytest.skip("a reason of the foreign project")
"""

# Reports, from inside the foreign run, whether qharness was loaded and whether torch was.
FOREIGN_CONFTEST = """
import sys

def pytest_sessionfinish(session):
    manager = session.config.pluginmanager
    loaded = manager.has_plugin("qharness") or manager.has_plugin("harness.plugin")
    with open("facts.txt", "w") as f:
        f.write(f"loaded={loaded} torch={'torch' in sys.modules}")
"""


def _foreign_project(pytester: pytest.Pytester, ini: str = "[pytest]\n") -> None:
    pytester.makepyfile(test_foreign=FOREIGN_TESTS)
    pytester.makeconftest(FOREIGN_CONFTEST)
    pytester.makeini(ini)


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, str, str]:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=junit.xml", *args)
    result.assert_outcomes(passed=1, skipped=1)
    junit = (pytester.path / "junit.xml").read_text()
    facts = (pytester.path / "facts.txt").read_text()
    return result, junit, facts


def test_inert_in_a_project_that_did_not_ask(pytester: pytest.Pytester) -> None:
    _foreign_project(pytester)
    result, junit, facts = _run(pytester)
    assert "loaded=True" in facts, "the plugin must be installed for this test to mean anything"
    assert "torch=False" in facts, "the inert plugin imported torch"
    # pytest itself lists installed plugins ("plugins: ..., qharness-0.1.0"); nothing else.
    ours = [line for line in result.outlines if "qharness" in line and "plugins:" not in line]
    assert not ours, f"the inert plugin printed: {ours}"
    assert "<properties>" not in junit
    assert "qharness" not in junit


@pytest.mark.parametrize(
    ("ini", "args"),
    [
        pytest.param("[pytest]\nqharness = true\n", (), id="ini"),
        pytest.param("[pytest]\n", ("--qharness",), id="flag"),
        pytest.param("[pytest]\n", ("--qharness-results=results.json",), id="results"),
        pytest.param("[pytest]\n", ("-p", "qharness"), id="p-entry-point"),
    ],
)
def test_active_when_asked(pytester: pytest.Pytester, ini: str, args: tuple[str, ...]) -> None:
    _foreign_project(pytester, ini)
    result, junit, _ = _run(pytester, *args)
    text = result.stdout.str()
    assert "qharness: platform" in text  # the header
    assert "qharness: skips by reason" in text
    assert "a reason of the foreign project" in text
    assert 'name="qharness_case"' in junit  # case fields travel with every report


def test_active_when_loaded_by_name_without_autoload(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    _foreign_project(pytester)
    result, _, facts = _run(pytester, "-p", "harness.plugin")
    assert "qharness: platform" in result.stdout.str()
    assert "loaded=True" in facts


def test_record_result_opts_a_test_in(pytester: pytest.Pytester) -> None:
    """Using a qharness fixture is an opt-in for that test, even in an inert run."""
    pytester.makepyfile(
        test_metrics="""
        def test_metric(record_result):
            record_result(sqnr_db=30.0)
        """
    )
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    assert 'name="qharness"' in (pytester.path / "junit.xml").read_text()
    assert "qharness: platform" not in result.stdout.str()
