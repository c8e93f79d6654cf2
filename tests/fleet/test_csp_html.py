"""`report --html PAGE --csp-safe`: a page Jenkins' default Content-Security-Policy
(``default-src 'none'; img-src 'self'; style-src 'self'``) renders whole: no inline styles,
no style attributes, no data: images; the styles and plots are files beside it."""

from __future__ import annotations

import re
from pathlib import Path

from harness import cli
from tests.fleet.test_fleet_night import _night


def test_csp_safe_page_keeps_styles_and_plots_as_same_origin_files(tmp_path: Path) -> None:
    history = str(tmp_path / "history")
    assert (
        cli.main(["history", "add", *map(str, _night(tmp_path, 1, None)), "--history", history])
        == 0
    )
    page = tmp_path / "out" / "fleet.html"
    page.parent.mkdir()
    tonight = [str(p) for p in _night(tmp_path, 2, broken="mi300x-rack2")]
    assert (
        cli.main(["report", *tonight, "--history", history, "--html", str(page), "--csp-safe"]) == 0
    )
    html = page.read_text()
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html)
    assert "data:" not in html
    assert '<link rel="stylesheet" href="fleet.css">' in html
    css = (tmp_path / "out" / "fleet.css").read_text()
    assert "td.fail{" in css  # the page's own rules
    assert ".qh-inline-0{background:#e5f5e8}" in css  # a legend swatch's style attribute
    assert 'class="pass qh-inline-0"' in html
    images = re.findall(r'<img alt="[^"]*" src="([^"]+)"', html)
    assert images  # the SQNR plot at least
    for src in images:
        assert src.startswith("fleet-assets/plot-")
        assert (page.parent / src).read_bytes().startswith(b"\x89PNG")


def test_jenkins_recipe_commands_are_valid_qharness_commands() -> None:
    import shlex

    from tests.conftest import REPO_ROOT

    text = (REPO_ROOT / "examples" / "Jenkinsfile").read_text()
    commands = re.findall(r"python -m harness (.+?)\s*(?:'|\n)", text)
    assert len(commands) == 3  # run, history add, report
    parser = cli.build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command.replace('"$', '"').replace("$", "")))
        assert args.command in ("run", "history", "report")
        if args.command == "report":
            assert args.csp_safe
            assert args.fail_on_regression
    assert "publishHTML" in text
    assert "QHARNESS_RUNNER" in text
