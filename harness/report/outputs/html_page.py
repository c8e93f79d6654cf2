"""`report.html`: one self-contained page (styles inline, plots as base64 PNG, no network).

Order: counts, provenance (`harness.report.outputs.stack_section`), the merged matrix, regressions,
failures with links to their repro bundles, skips by reason per platform, plots. Beyond
`MAX_GROUPS` runners the matrix has a column per group of runners, each cell counting its
runners' verdicts (`harness.report.model.fleet_groups`).
Every string from a results file goes through `html_text`.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from harness.report.model.escape import html_text
from harness.report.model.models_section import model_rows, models_html
from harness.report.model.nightly import NightlyReport
from harness.report.model.regress import Regression
from harness.report.outputs import plots
from harness.report.outputs.grouping import group_items
from harness.report.outputs.matrix_html import matrix_html
from harness.report.outputs.stack_section import stack_html, stack_rows

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1300px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde;
padding-bottom:4px}.muted{color:#667}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #dde;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#f3f5f9;position:sticky;top:0}
td.pass{background:#e5f5e8;color:#14532d}td.fail{background:#fde2e1;color:#8a1c17;font-weight:600}
td.emulated-only{background:#fff4d6;color:#7a5200}td.skipped{background:#eef0f4;color:#555}
td.partial{background:#f3e8ff;color:#5b2a86}td.cpu-code{background:#e6edf7;color:#1e3a5f}
td.cell{min-width:7em;max-width:16em}td.cell .detail,td.cell .sqnr{display:block;
font-size:11px;font-weight:400}code{font:12px ui-monospace,Menlo,Consolas,monospace;
word-break:break-all}.kind{font-weight:600;white-space:nowrap}.num{text-align:right}
img{max-width:100%;border:1px solid #eee;margin:6px 0}.counts td{text-align:right}
.counts td:first-child,.counts td:nth-child(2),.counts td:nth-child(3){text-align:left}
.warning{background:#fff4d6;color:#7a5200;padding:4px 8px;border-left:4px solid #d49a00}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border-radius:3px}
"""


def _counts(report: NightlyReport) -> str:
    rows = []
    for platform in report.platforms:
        run = report.runs[platform]
        c = run.outcomes  # counted as its file was read (`harness.report.model.digest`)
        failed = int(c.get("failed", 0) + c.get("error", 0))
        base = report.baselines.get(platform) or "none (first run)"
        partial = " <b>(partial)</b>" if run.partial else ""
        rows.append(
            f"<tr><td>{html_text(platform)}</td><td><code>{html_text(run.run_id)}</code>{partial}"
            f"</td><td><code>{html_text(base)}</code></td><td>{int(c.get('passed', 0))}</td>"
            f"<td>{failed}</td><td>{int(c.get('skipped', 0))}</td><td>{run.tests}</td></tr>"
        )
    return (
        '<table class="counts"><tr><th>platform</th><th>run</th><th>baseline</th><th>passed</th>'
        f"<th>failed</th><th>skipped</th><th>tests</th></tr>{''.join(rows)}</table>"
    )


def _regression_row(r: Regression) -> str:
    return (
        f'<tr><td class="kind">{html_text(r.kind)}</td><td>{html_text(r.platform)}</td>'
        f"<td><code>{html_text(r.nodeid)}</code>"
        + (f'<br><span class="muted">{html_text(r.detail, 300)}</span>' if r.detail else "")
        + f"</td><td>{html_text(r.old)}</td><td>{html_text(r.new)}</td>"
        f"<td><code>{html_text(r.first_run)}</code></td></tr>"
    )


def _regressions(report: NightlyReport) -> str:
    """Grouped by runner, scheme and path as in summary.md (`harness.report.outputs.grouping`): a
    table of the groups with their counts, then every regression under its group's head."""
    if not report.regressions:
        return "<p>none</p>"
    groups = group_items(
        report, [(r.platform, r.nodeid, r.kind, _regression_row(r)) for r in report.regressions]
    )
    counts = "".join(
        f"<tr><td>{html_text(g.platform)}</td><td>{html_text(g.scheme)}</td>"
        f'<td>{html_text(g.path)}</td><td class="num">{len(g.lines)}</td>'
        f"<td>{html_text(', '.join(f'{k} {n}' for k, n in g.kinds.most_common()))}</td></tr>"
        for g in groups
    )
    rows = "".join(
        f'<tr><th colspan="6">{html_text(g.platform)} · {html_text(g.scheme)} · '
        f"{html_text(g.path)} ({len(g.lines)})</th></tr>" + "".join(g.lines)
        for g in groups
    )
    return (
        "<table><tr><th>runner</th><th>scheme</th><th>path</th><th>count</th><th>what</th>"
        f"</tr>{counts}</table>"
        "<table><tr><th>kind</th><th>platform</th><th>test</th><th>old</th><th>new</th>"
        f"<th>first seen</th></tr>{rows}</table>"
    )


def _failures(report: NightlyReport, page_dir: Path) -> str:
    if not report.failures:
        return "<p>none</p>"
    rows = []
    for f in report.failures:
        link = "no bundle"
        if f.repro:
            href = os.path.relpath(f.repro, page_dir)
            link = f'<a href="{html_text(href)}">{html_text(Path(f.repro).name)}</a>'
        rows.append(
            f"<tr><td>{html_text(f.platform)}</td><td><code>{html_text(f.nodeid)}</code><br>"
            f'<span class="muted">{html_text(f.reason or f.outcome, 400)}</span></td>'
            f"<td><code>{html_text(f.since)}</code></td><td>{link}</td></tr>"
        )
    return (
        "<table><tr><th>platform</th><th>test and reason</th><th>failing since</th>"
        f"<th>repro bundle</th></tr>{''.join(rows)}</table>"
    )


def _skips(report: NightlyReport) -> str:
    if not report.skips:
        return "<p>none</p>"
    rows = "".join(
        f'<tr><td>{html_text(s.platform)}</td><td class="num">{s.count}</td>'
        f"<td>{html_text(s.reason or '(no reason given)', 400)}</td></tr>"
        for s in report.skips
    )
    return f"<table><tr><th>platform</th><th>tests</th><th>reason</th></tr>{rows}</table>"


def _plot(title: str, png: str | None, missing: str) -> str:
    if png is None:
        return f"<h3>{title}</h3><p class='muted'>{missing}</p>"
    return f'<h3>{title}</h3><img alt="{title}" src="data:image/png;base64,{png}">'


def _no_peaks(report: NightlyReport) -> str:
    """Why the peak-memory plot is not drawn: no peaks, or peaks too alike to tell apart."""
    alike = plots.peaks_alike(report.peaks)
    if alike is None:
        return "no peaks recorded"
    low, high = alike
    return (
        f"every scheme's peak is between {low:.2f} and {high:.2f} MiB (within "
        f"{plots.PEAK_SPREAD:.0%}): no plot, the bars would tell nothing apart"
    )


def render_html(report: NightlyReport, page_path: Path) -> str:
    """The page; ``page_path`` is where it will be written (repro links are relative to it)."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_reg = len(report.regressions)
    plot_html = "".join(
        [
            _plot(
                "SQNR per scheme over the nights",
                plots.sqnr_over_runs(report.sqnr),
                "no linear SQNR recorded",
            ),
            _plot("Peak memory per scheme", plots.peak_memory(report.peaks), _no_peaks(report)),
            _plot(
                "Benchmark times",
                plots.benchmark_times(report.benchmarks),
                "no benchmarks in these runs (run with --bench)",
            ),
        ]
    )
    notes = "".join(f"<p class='warning'>warning: {html_text(n)}</p>" for n in report.notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>qharness report</title>
<style>{STYLE}</style></head><body>
<h1>qharness report</h1><p class="muted">generated {now};
{len(report.platforms)} platform(s), {n_reg} regression(s),
{len(report.failures)} failing test(s)</p>
{_counts(report)}{notes}
{stack_html(stack_rows(report))}
<h2>Matrix: scheme x path x platform</h2>{matrix_html(report)}
<h2>Regressions ({n_reg})</h2>{_regressions(report)}
<h2>Failures ({len(report.failures)})</h2>{_failures(report, Path(page_path).parent)}
<h2>Skips by reason, per platform</h2>{_skips(report)}
{models_html(model_rows(report.models))}
<h2>Plots</h2>{plot_html}
</body></html>
"""
