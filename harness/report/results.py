"""The results file's old import path, kept for scripts: `harness.report.reading.results`."""

from harness.report.reading.results import (
    SCHEMA,
    ResultsError,
    read_results,
    results_problem,
    write_results,
)

__all__ = ["SCHEMA", "ResultsError", "read_results", "results_problem", "write_results"]
