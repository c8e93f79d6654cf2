"""The report's plots, drawn with matplotlib (Agg) and returned as base64 PNG for embedding.

- SQNR per scheme over the nights: median linear-suite SQNR per scheme and run (MoE SQNR
  comes from inputs built to cancel and would say nothing about the scheme).
- Peak memory per scheme: the memory suite's measured peak of two forward calls (the number
  its budget holds), the largest over its paths and shapes, per scheme and platform. Other
  suites' peaks (the reference quantizer's, a linear case's) measure other things and would
  make every scheme's bar the same. Where every bar would still be within `PEAK_SPREAD` of
  the largest, nothing is drawn and the page gives the range.
- Benchmark times over the nights with the noise band (mean ± `NOISE_SIGMAS` std of the
  history), the band the regression rule uses.
Beyond `MAX_GROUPS` runners, the SQNR panels and peak bars are per group of runners
(`harness.report.model.fleet_groups`), never one per runner: a fleet's page stays a few panels.
Each returns None when there is nothing to draw. Series get distinct (colour, marker) pairs
from `series_styles` (20 colours x 10 markers), so 30 schemes stay tellable apart.
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.report.model.fleet_groups import is_grouped, runner_groups
from harness.report.model.regress import NOISE_SIGMAS

MAX_BENCHMARKS = 8
MAX_TICKS = 12  # run labels on the time axis (60 labels cost seconds of drawing)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
MEMORY_SUITE = "memory"  # the suite whose peak_bytes is the forward call's, under a budget
PEAK_SPREAD = 0.05  # peaks within 5% of the largest are "alike": not plotted


def series_styles(count: int) -> list[tuple[tuple[float, ...], str]]:
    """``count`` distinct (RGBA colour, marker) pairs: tab20's colours, then the next marker."""
    colours = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]
    return [(tuple(colours[i % 20]), MARKERS[(i // 20) % len(MARKERS)]) for i in range(count)]


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _runs_in_order(frame: pd.DataFrame) -> list[str]:
    runs = frame.drop_duplicates("run_id").sort_values(["created", "run_id"])
    return [str(r) for r in runs["run_id"]]


def _sqnr_panel(ax: Axes, title: str, table: pd.DataFrame, order: list[str]) -> None:
    """One panel: a line per scheme (rows of ``table``) over ``order`` (its columns)."""
    styles = series_styles(len(table))
    for (scheme, series), (colour, marker) in zip(table.iterrows(), styles, strict=True):
        ax.plot(
            range(len(order)),
            series.to_numpy(),
            color=colour,
            marker=marker,
            ms=4,
            label=str(scheme),
        )
    ax.set_title(title, fontsize=10)
    ticks = list(range(0, len(order), max(1, len(order) // MAX_TICKS)))
    ax.set_xticks(ticks)
    ax.set_xticklabels([order[i][:14] for i in ticks], rotation=20, ha="right", fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="center left", bbox_to_anchor=(1.01, 0.5))


def _sqnr_per_runner(rows: pd.DataFrame, platform: str) -> tuple[str, pd.DataFrame, list[str]]:
    """One runner's panel: its median per scheme, run by run."""
    mine = rows[rows["platform"] == platform]
    order = _runs_in_order(mine)
    table = mine.groupby(["scheme", "run_id"])["sqnr_db"].median().unstack("run_id")
    title = f"{platform}: median linear SQNR per scheme (dB)"
    return title, table.reindex(columns=order), order


def _sqnr_per_group(rows: pd.DataFrame, group: str) -> tuple[str, pd.DataFrame, list[str]]:
    """A group's panel: per scheme and night (the run's date), the median over its runners
    of each runner's median; one runner's run a night is one value, whatever the fleet."""
    mine = rows[rows["group"] == group]
    nights = mine["created"].str.slice(0, 10).fillna(mine["run_id"])
    table = mine.assign(night=nights).groupby(["scheme", "night"])["sqnr_db"].median()
    table = table.unstack("night")
    order = sorted(str(n) for n in table.columns)
    title = f"{group}: median over runners of the median linear SQNR per scheme, by night (dB)"
    return title, table.reindex(columns=order), order


def sqnr_over_runs(history: pd.DataFrame) -> str | None:
    rows = history[(history["suite"] == "linear") & history["sqnr_db"].notna()]
    if rows.empty:
        return None
    groups = runner_groups(str(p) for p in rows["platform"].dropna().unique())
    if is_grouped(groups):
        rows = rows.assign(group=rows["platform"].map(groups))
        panels = [_sqnr_per_group(rows, g) for g in sorted(set(groups.values()))]
    else:
        panels = [_sqnr_per_runner(rows, p) for p in sorted(groups)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.2 * len(panels)), squeeze=False)
    for ax, (title, table, order) in zip(axes[:, 0], panels, strict=True):
        _sqnr_panel(ax, title, table, order)
    fig.subplots_adjust(hspace=0.75)
    return _png(fig)


def _peak_table(frame: pd.DataFrame) -> pd.DataFrame | None:
    """The memory suite's largest peak (MiB) per scheme (rows) and runner group (columns)."""
    rows = frame[
        frame["peak_bytes"].notna() & frame["scheme"].notna() & (frame["suite"] == MEMORY_SUITE)
    ]
    if rows.empty:
        return None
    groups = runner_groups(str(p) for p in rows["platform"].dropna().unique())
    rows = rows.assign(platform=rows["platform"].map(groups))  # at most MAX_GROUPS bars a scheme
    return rows.groupby(["scheme", "platform"])["peak_bytes"].max().unstack("platform") / 2**20


def peaks_alike(frame: pd.DataFrame) -> tuple[float, float] | None:
    """(smallest, largest) peak in MiB when every scheme's bar is within `PEAK_SPREAD` of the
    largest: bars of one length tell nothing apart, so the page says so instead."""
    table = _peak_table(frame)
    if table is None:
        return None
    low, high = float(table.min().min()), float(table.max().max())
    return (low, high) if high - low <= PEAK_SPREAD * high else None


def peak_memory(frame: pd.DataFrame) -> str | None:
    """The bars, None without peaks or when they are alike (`peaks_alike`)."""
    table = _peak_table(frame)
    if table is None or peaks_alike(frame) is not None:
        return None
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(table) + 1.2))
    colours = [colour for colour, _ in series_styles(len(table.columns))]
    table.sort_index(ascending=False).plot.barh(ax=ax, width=0.8, color=colours)
    ax.set_xlabel(
        "peak of two forward calls, memory suite, largest over its paths, shapes and a "
        "group's runners (MiB)"
    )
    ax.set_ylabel("")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(title="platform", fontsize=8)
    return _png(fig)


def benchmark_times(history: pd.DataFrame) -> str | None:
    rows = history[history["bench_mean_s"].notna()]
    if rows.empty:
        return None
    slowest = rows.groupby(["platform", "nodeid"])["bench_mean_s"].mean().nlargest(MAX_BENCHMARKS)
    fig, ax = plt.subplots(figsize=(10, 4))
    styles = series_styles(len(slowest))
    for (platform, name), (colour, marker) in zip(slowest.index, styles, strict=True):
        mine = rows[(rows["platform"] == platform) & (rows["nodeid"] == name)]
        mine = mine.sort_values(["created", "run_id"])
        x = range(len(mine))
        means = mine["bench_mean_s"].to_numpy() * 1e3
        centre, spread = means.mean(), means.std()
        label = f"{platform}: {str(name).rsplit('::', 1)[-1][:60]}"
        line = ax.plot(x, means, color=colour, marker=marker, ms=4, label=label)[0]
        ax.fill_between(
            x,
            centre - NOISE_SIGMAS * spread,
            centre + NOISE_SIGMAS * spread,
            color=line.get_color(),
            alpha=0.12,
        )
    longest = int(rows.groupby(["platform", "nodeid"]).size().max())
    ax.set_xlim(-0.5, max(longest, 2) - 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("mean time (ms)")
    ax.set_xlabel("run (oldest to newest)")
    ax.set_title(f"benchmarks with their noise band (mean ± {NOISE_SIGMAS:g} std)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return _png(fig)
