"""The text report's old import path, kept for scripts: `harness.report.outputs.text`."""

from harness.report.outputs.text import regressions, render_report

__all__ = ["regressions", "render_report"]
