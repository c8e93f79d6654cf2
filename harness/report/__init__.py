"""Results files and the reports rendered from them: the nightly report (docs/CI.md,
docs/HISTORY.md); the CLI that runs it is `harness.cli` (docs/CLI.md).

Three floors, each importing only the ones below it (tests/test_layering.py): reading a
run (files, limits, the record schema, rows), the model of a run and of a night (the
digest, matrix, regressions), and the outputs rendered from the model (text, Markdown,
HTML, annotations), each declared once in the output table.

Modules, each with its one job:

- ``reading/``: Results files, run directories and the history as they are read and
  written: limits, the record schema, validation, streaming, rows per test.
- ``model/``: One run folded into its digest, and a night of runs into the report model:
  matrix cells, regressions, identity warnings, the model suite's section.
- ``outputs/``: What is written from the model: the output table (`report`'s options and
  writers), the text report, Markdown, HTML and its parts, plots, annotations, junit
  regrouping, where an output may be written, and the docs' generated facts.
- ``render``, ``results``: The paths scripts import (`harness.report.render.render_report`,
  `harness.report.results.read_results`), kept: they re-export
  `harness.report.outputs.text` and `harness.report.reading.results`.
"""
