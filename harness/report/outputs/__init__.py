"""What is written from the report model: each output of `report` declared once, in the
output table, with its option and its writer.

Modules, each with its one job:

- ``table``: The output table: each of `report`'s outputs (the text report, `--html`,
  `--summary`, GitHub annotations) with its CLI option and its writer; the command adds
  the options and writes what was asked for from it, in table order.
- ``targets``: Where a file named on the command line may be written (`report
  --out/--html/--summary`, `run --out`): a device or FIFO as a stream; a directory, a path
  below a file, another run directory's file or a file two outputs name refused (exit 2);
  anything else atomically.
- ``text``: The single-file text report of `report --results` (and what `run` prints),
  rendered from the run's digest.
- ``markdown``: `summary.md` and the full Markdown report.
- ``grouping``: The summary's regressions and failures grouped by platform, scheme and path
  before tests; runner paths made relative.
- ``html_page``: The self-contained HTML page.
- ``matrix_html``: report.html's matrix: scheme x path rows, a column per runner or group;
  each cell's verdict, per-suite counts, linear median SQNR and its change since baseline.
- ``stack_section``: The page's provenance section: one row per distinct software stack
  (torch, qharness, harness and engine commits, plugin and engine versions) with its runners.
- ``plots``: matplotlib plots as base64 PNG.
- ``csp``: The HTML page with its styles and plots as same-origin files, for a strict
  Content-Security-Policy (Jenkins).
- ``annotations``: Regressions and new failures as GitHub Actions annotations, one per
  group.
- ``junit_suites``: `run`'s junit.xml regrouped into one testsuite per suite file (pytest
  writes one named "pytest"), each recounted, written atomically.
- ``doc_facts``: Counts, sizes and tables the docs state (store per group, case grids, the
  history columns), generated into marked blocks; a self-test fails on a stale doc.
"""
