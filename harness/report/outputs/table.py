"""`report`'s outputs, each declared once: its option, its help and its writer.

The command (`harness.cli.report`) adds each output's option from `REPORT_OUTPUTS` and,
once the night's model is built, runs the writer of each output asked for, in table order,
printing the lines each writer returns: a new output is one row here and one writer. The
writers import their renderers when they run, so building the CLI's parser imports none of
them (no pandas, no matplotlib).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.report.model.nightly import NightlyReport
    from harness.report.outputs.targets import Outputs


@dataclass(frozen=True)
class Rendering:
    """What a writer may read: the night's model, the runs asked for and where outputs go."""

    report: NightlyReport
    runs: list[Path]
    baseline: Path | None
    legacy: bool  # one results file, no history: the single-file text report
    paths: dict[str, Path | None]  # each output's option -> its path (None: not asked for)
    outputs: Outputs
    csp_safe: bool


Writer = Callable[[Rendering, Path | None], list[str]]


@dataclass(frozen=True)
class ReportOutput:
    """One output of `report`: ``--option PATH`` (or a switch, ``flag``) and its writer,
    which writes it (or returns it to print) and returns the lines to print."""

    option: str
    help: str
    write: Writer
    always: bool = False  # written (to stdout) when its option is not given
    flag: bool = False  # a switch: what it writes is printed

    @property
    def dest(self) -> str:
        """The option's attribute on argparse's namespace."""
        return self.option.lstrip("-").replace("-", "_")


def _text(r: Rendering, path: Path | None) -> list[str]:
    """The text report of one results file, else the Markdown report of the night; printed
    when ``--out`` is not given."""
    from harness.report.outputs.markdown import full_markdown
    from harness.report.outputs.text import render_report

    text = render_report(r.runs[0], baseline=r.baseline) if r.legacy else full_markdown(r.report)
    if path is None:
        return [text]
    r.outputs.write("--out", text)
    return [f"report written to {path}"]


def _html(r: Rendering, path: Path | None) -> list[str]:
    from harness.report.outputs.html_page import render_html

    assert path is not None
    page = render_html(r.report, path)
    if not r.csp_safe:
        r.outputs.write("--html", page)
        return [f"html report written to {path}"]
    from harness.report.outputs.csp import write_csp_safe

    extra = write_csp_safe(page, path, lambda _, text: r.outputs.write("--html", text))
    return [f"html report written to {path} (CSP-safe; {len(extra)} asset file(s) beside it)"]


def _summary(r: Rendering, path: Path | None) -> list[str]:
    from harness.report.outputs.markdown import summary_markdown

    assert path is not None
    html = r.paths.get("--html")
    link = os.path.relpath(html, path.parent) if html else None
    r.outputs.write("--summary", summary_markdown(r.report, link))
    return [f"summary written to {path}"]


def _annotations(r: Rendering, path: Path | None) -> list[str]:
    from harness.report.outputs.annotations import github_annotations

    return list(github_annotations(r.report))


REPORT_OUTPUTS: tuple[ReportOutput, ...] = (
    ReportOutput("--out", "write the markdown report here instead of stdout", _text, always=True),
    ReportOutput("--html", "write the self-contained HTML page here", _html),
    ReportOutput("--summary", "write the short CI summary (Markdown) here", _summary),
    ReportOutput(
        "--github-annotations",
        "print regressions and new failures as GitHub Actions error annotations",
        _annotations,
        flag=True,
    ),
)
