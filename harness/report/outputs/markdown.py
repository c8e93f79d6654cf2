"""Markdown renderings of a `NightlyReport`: the short CI summary and the full text report.

`summary_markdown` stays under `SUMMARY_LIMIT` characters (GitHub's job summary holds
1 MiB per step; a morning summary is read, not scrolled): counts, regressions and new
failures, each list cut with a count of what was left out, and a link to the HTML page.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.platform.simulate import EXECUTIONS
from harness.report.model.escape import md_inline
from harness.report.model.models_section import model_rows, models_markdown
from harness.report.model.nightly import NightlyReport
from harness.report.outputs.grouping import group_items, grouped_markdown, without_runner_paths

SUMMARY_LIMIT = 60_000
LIST_LIMIT = 25


def _counts_table(report: NightlyReport) -> list[str]:
    lines = [
        "| platform | run | baseline | passed | failed | skipped | other |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for platform in report.platforms:
        run = report.runs[platform]
        outcomes = run.outcomes  # counted as its file was read (`harness.report.model.digest`)
        passed = outcomes["passed"]
        failed = outcomes["failed"] + outcomes["error"]
        skipped = outcomes["skipped"]
        other = sum(outcomes.values()) - passed - failed - skipped
        base = report.baselines.get(platform) or "none (first run)"
        partial = " (partial)" if run.partial else ""
        lines.append(
            f"| {md_inline(platform)} | {md_inline(run.run_id)}{partial} | {md_inline(base)} "
            f"| {passed} | {failed} | {skipped} | {other} |"
        )
    return lines


def what_ran_lines(report: NightlyReport) -> list[str]:
    """For each simulated platform, what its tests ran (docs/CLI.md ``execution``): GPU
    kernel source under the interpreter, CPU code under the arch's expectations, or nothing;
    a green simulated column of CPU code says nothing of the arch's kernels."""
    lines = []
    for platform in report.platforms:
        executions = report.runs[platform].executions
        if executions:
            counts = ", ".join(
                f"{executions[e]} {words}" for e, words in EXECUTIONS.items() if executions[e]
            )
            lines.append(f"- simulated {md_inline(platform)}: {counts}")
    return ["", "What ran on simulated platforms:", "", *lines] if lines else []


def _capped(items: list[str], limit: int = LIST_LIMIT) -> Iterable[str]:
    yield from items[:limit]
    if len(items) > limit:
        yield f"- ... and {len(items) - limit} more (see report.html)"


def regression_lines(report: NightlyReport) -> list[str]:
    return [
        f"- **{md_inline(r.kind)}** {md_inline(r.platform)} {md_inline(r.nodeid, 200)}: "
        f"{md_inline(r.old)} → {md_inline(r.new)}"
        + (f" ({md_inline(r.detail, 160)})" if r.detail else "")
        + f"; first in {md_inline(r.first_run)}"
        for r in report.regressions
    ]


def failure_lines(report: NightlyReport, new_only: bool) -> list[str]:
    return [
        f"- {md_inline(f.platform)} {md_inline(f.nodeid, 200)}: "
        f"{md_inline(f.reason or f.outcome, 200)}"
        + ("" if f.is_new else f" (failing since {md_inline(f.since)})")
        + (f" — repro {md_inline(f.repro)}" if f.repro else "")
        for f in report.failures
        if f.is_new or not new_only
    ]


def summary_markdown(report: NightlyReport, html_link: str | None = "report.html") -> str:
    """The short summary for a CI job page: regressions and new failures grouped by
    platform, scheme and path (every group counted, a few tests each), no absolute paths."""
    regs = regression_lines(report)
    new_failures = failure_lines(report, new_only=True)
    fresh = [f for f in report.failures if f.is_new]
    reg_groups = group_items(
        report,
        [
            (r.platform, r.nodeid, r.kind, line)
            for r, line in zip(report.regressions, regs, strict=True)
        ],
    )
    failure_groups = group_items(
        report,
        [
            (f.platform, f.nodeid, f.outcome, line)
            for f, line in zip(fresh, new_failures, strict=True)
        ],
    )
    lines = ["## qharness nightly", "", *_counts_table(report), *what_ran_lines(report), ""]
    lines += [f"### Regressions ({len(regs)})", ""]
    lines += grouped_markdown(reg_groups)
    lines += [
        "",
        f"### New failures ({len(new_failures)}; {len(report.failures)} failing in all)",
        "",
    ]
    lines += grouped_markdown(failure_groups)
    lines += models_markdown(model_rows(report.models), heading="###")
    if report.notes:
        lines += ["", f"### Warnings ({len(report.notes)})", ""]
        lines += list(_capped([f"- {md_inline(n, 400)}" for n in report.notes]))
    if html_link:
        lines += ["", f"Full report: {html_link} (matrix, skips by reason, plots, repro bundles)"]
    text = without_runner_paths("\n".join(lines) + "\n", report)
    if len(text) > SUMMARY_LIMIT:
        text = text[: SUMMARY_LIMIT - 80] + "\n\n(summary cut to its size limit; see report.html)\n"
    return text


def full_markdown(report: NightlyReport) -> str:
    """Everything in text form: counts, matrix, regressions, failures, skips."""
    lines = [
        "# qharness report",
        "",
        *_counts_table(report),
        *what_ran_lines(report),
        "",
        "## Matrix (scheme x path x platform)",
        "",
    ]
    platforms = report.platforms
    lines.append("| scheme | path | " + " | ".join(md_inline(p) for p in platforms) + " |")
    lines.append("|---|---|" + "---|" * len(platforms))
    for (scheme, path), cells in sorted(report.matrix.items()):
        row = [cells[p].label if p in cells else "" for p in platforms]
        lines.append(f"| {md_inline(scheme)} | {md_inline(path)} | " + " | ".join(row) + " |")
    regs = regression_lines(report)
    lines += ["", f"## Regressions ({len(regs)})", "", *(regs or ["none"])]
    fails = failure_lines(report, new_only=False)
    lines += ["", f"## Failures ({len(fails)})", "", *(list(_capped(fails, 200)) or ["none"])]
    lines += [
        "",
        f"## Skips by reason ({sum(s.count for s in report.skips)})",
        "",
    ]
    for skip in report.skips:
        reason = skip.reason or "(no reason given)"
        lines.append(f"- {md_inline(skip.platform)}: {skip.count} x {md_inline(reason)}")
    if not report.skips:
        lines.append("none")
    lines += [f"- note: {md_inline(n)}" for n in report.notes]
    lines += models_markdown(model_rows(report.models))
    return "\n".join(lines) + "\n"
