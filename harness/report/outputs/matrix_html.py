"""report.html's matrix: scheme x path rows, a column per runner or per group of runners.

A runner's cell gives its verdict, the per-suite counts on a line below it, and the linear
suite's median SQNR with its change since the runner's baseline. On a simulated platform
the verdict says what ran, and a cell of CPU code alone is coloured apart from a pass of
interpreted GPU kernel source. Beyond `MAX_GROUPS`
runners a column is a group (`harness.report.model.fleet_groups`) whose cell counts its runners
of each verdict, coloured by the worst, names the runners of each verdict but pass on hover,
and gives the median over its runners of their SQNR and of its change.
"""

from __future__ import annotations

import statistics

from harness.report.model.escape import html_text
from harness.report.model.fleet_groups import is_grouped, runner_groups
from harness.report.model.matrix import Cell
from harness.report.model.nightly import NightlyReport

Sqnr = tuple[float, float | None]  # tonight's median SQNR, the baseline's (None: none)


def _sqnr_text(sqnr: Sqnr | None) -> str:
    """A cell's linear median SQNR and its change since the baseline, as a line of its own."""
    if sqnr is None:
        return ""
    now, base = sqnr
    change = f" (Δ {now - base:+.2f})" if base is not None else ""
    return f'<span class="sqnr">{now:.2f} dB{change}</span>'


def _cell(cell: Cell | None, sqnr: Sqnr | None = None) -> str:
    """A runner's cell: its verdict, the per-suite counts beneath it, then its SQNR."""
    if cell is None:
        return '<td class="cell"></td>'
    title = f' title="{html_text(cell.reason, 300)}"' if cell.reason else ""
    detail = f'<span class="detail">{html_text(cell.detail)}</span>' if cell.detail else ""
    cpu = " cpu-code" if cell.only_cpu_code else ""  # simulated: not the arch's kernels
    return (
        f'<td class="cell {cell.verdict}{cpu}"{title}>{html_text(cell.head)}{detail}'
        f"{_sqnr_text(sqnr)}</td>"
    )


# A grouped cell's colour: its worst verdict, in this order.
VERDICT_ORDER = ("fail", "partial", "emulated-only", "skipped", "pass", "")
VERDICT_WORDS = {"skipped": "not run", "partial": "partly run", "": "no verdict"}
NAMED_RUNNERS = 5  # runners named per verdict in a grouped cell's hover text


def _group_sqnr_text(sqnrs: list[Sqnr]) -> str:
    """The median over a group's runners of their cell's SQNR, and of its change since each
    runner's baseline (over the runners that have one)."""
    if not sqnrs:
        return ""
    now = statistics.median(n for n, _ in sqnrs)
    changes = [n - b for n, b in sqnrs if b is not None]
    change = f" (Δ {statistics.median(changes):+.2f})" if changes else ""
    return f'<span class="sqnr">median {now:.2f} dB{change}</span>'


def _group_cell(cells: list[tuple[str, Cell]], sqnrs: list[Sqnr]) -> str:
    """One cell for a group of runners: how many runners got each verdict, coloured by the
    worst, with the runners of each verdict but pass named on hover, then their SQNR."""
    if not cells:
        return '<td class="cell"></td>'
    by_verdict: dict[str, list[str]] = {}
    for key, cell in cells:
        by_verdict.setdefault(cell.verdict, []).append(key)
    present = [v for v in VERDICT_ORDER if v in by_verdict]
    label = ", ".join(f"{len(by_verdict[v])} {VERDICT_WORDS.get(v, v)}" for v in present)
    named = []
    for verdict in present:
        if verdict == "pass":
            continue
        keys = by_verdict[verdict]
        more = f" (+{len(keys) - NAMED_RUNNERS} more)" if len(keys) > NAMED_RUNNERS else ""
        named.append(
            f"{VERDICT_WORDS.get(verdict, verdict)}: {', '.join(keys[:NAMED_RUNNERS])}{more}"
        )
    title = f' title="{html_text("; ".join(named), 600)}"' if named else ""
    return f'<td class="cell {present[0]}"{title}>{html_text(label)}{_group_sqnr_text(sqnrs)}</td>'


def _matrix_rows(report: NightlyReport) -> tuple[list[str], list[str]]:
    """The matrix's column heads and rows: one column per runner, or per group of runners
    beyond `MAX_GROUPS` (`harness.report.model.fleet_groups`)."""
    groups = runner_groups(report.platforms)
    if not is_grouped(groups):
        rows = [
            f"<tr><td>{html_text(scheme)}</td><td>{html_text(path)}</td>"
            + "".join(
                _cell(cells.get(p), report.cell_sqnr.get((scheme, path, p)))
                for p in report.platforms
            )
            + "</tr>"
            for (scheme, path), cells in sorted(report.matrix.items())
        ]
        return list(report.platforms), rows
    names = sorted(set(groups.values()))
    members = {name: [k for k in report.platforms if groups[k] == name] for name in names}
    rows = []
    for (scheme, path), cells in sorted(report.matrix.items()):
        tds = "".join(
            _group_cell(
                [(k, cells[k]) for k in members[name] if k in cells],
                [
                    found
                    for k in members[name]
                    if (found := report.cell_sqnr.get((scheme, path, k))) is not None
                ],
            )
            for name in names
        )
        rows.append(f"<tr><td>{html_text(scheme)}</td><td>{html_text(path)}</td>{tds}</tr>")
    return names, rows


def matrix_html(report: NightlyReport) -> str:
    """The legend and the table (module doc)."""
    heads, rows = _matrix_rows(report)
    head = "".join(f"<th>{html_text(h)}</th>" for h in heads)
    legend = (
        '<p class="legend"><span class="pass" style="background:#e5f5e8">pass</span>'
        '<span style="background:#fde2e1">fail</span>'
        '<span style="background:#f3e8ff">partly run</span>'
        '<span style="background:#fff4d6">emulated-only</span>'
        '<span style="background:#eef0f4">not run</span>'
        '<span style="background:#e6edf7">CPU code on a simulated arch</span>'
        " hover a cell for its reason</p>"
    )
    return (
        f"{legend}<table><tr><th>scheme</th><th>path</th>{head}</tr>{''.join(rows)}</table>"
        if rows
        else "<p>no scheme x path results</p>"
    )
