"""Results files and the reports rendered from them: the nightly report (docs/CI.md,
docs/HISTORY.md); the CLI that runs it is `harness.cli` (docs/CLI.md).

Modules, each with its one job:

- ``rundir``: Run ids, the run directory's files, the `latest` pointer and `latest.json` (a
  link through it, so a kill never splits them); a new run sweeps killed runs' temp files.
- ``outputs``: Where a file named on the command line may be written (`report
  --out/--html/--summary`, `run --out`): a device or FIFO as a stream; a directory, a path
  below a file, another run directory's file or a file two outputs name refused (exit 2);
  anything else atomically.
- ``limits``: The limits every value read from a results file or run path must keep, checked
  once where it is read (integers within int64, numbers within float64, text without lone
  surrogates, paths that decode as UTF-8), so no later step (history, report) meets one it
  cannot hold.
- ``schema``: The field table: one row per results-record field (where it lives, the JSON
  type validation holds it to, its history dtype, which way it regresses, its doc), read by
  validation, the history columns, the model section, the recorder and docs/HISTORY.md.
- ``results``: The results file (`qharness.results/1`), written atomically, `partial` when
  interrupted.
- ``junit_suites``: `run`'s junit.xml regrouped into one testsuite per suite file (pytest
  writes one named "pytest"), each recounted, written atomically.
- ``frame``, ``runs``: Results (and benchmark JSON) as one row per test per run; loading one
  run as a frame (the history, a test-by-test comparison) and adding runs to the history.
- ``stream``: A results file read record by record (the top-level object value by value, a
  megabyte at a time, each record checked by the results reader's rules); a file it cannot
  vouch for is read whole, so every problem keeps `read_results`' message.
- ``digest``: One run folded, record by record, into what the report shows of it
  (`RunDigest`): outcome counts, its matrix cells, skip counts per reason, its failing
  tests, the plots' per-run SQNR medians and memory peaks, its benchmark rows; no record is
  kept.
- ``record_tables``: The records of one run as the text report groups them (outcomes and
  executions per suite and path, SQNR and peaks per scheme and path, by their printed
  names), folded into the digest.
- ``provenance``: What each run records of where its numbers came from: harness and engine
  commits, plugin versions, and the versions of the engines the installed adapters declare
  (entry-point group `qharness.engines`).
- ``identity``: The report keyed by runner (`platform@label`), and warnings where runs share
  a key, a baseline came from another host or is missing, or the stack (torch, CUDA/HIP,
  driver, harness and engine commits and versions) changed since it.
- ``regress``: Regression rules, one merge of two runs (linear), first run of each
  regression.
- ``models_section``: The model suite's fields (history columns, results validation), its
  section in every report (per model x tool x preset: logits SQNR and top-1 against the
  float model and the emulated checkpoint, layer-test counts) and its regression rules; the
  renderers and the frame call it through one hook each.
- ``matrix``: The scheme x path x platform matrix and its cell verdicts, tallied one row at
  a time (`MatrixFold`).
- ``nightly``: The report model: current run per platform, baselines from history, failures
  with "since" and bundles, skips. Data flow: each given results file is read once into its
  digest; a runner with other known runs (history, older given runs, `--baseline`) is then
  compared test by test, its runs read again as frames one runner at a time; renderers get
  the aggregates, never a frame of every record.
- ``plain``: The one boundary between frames and renderers: rows leave a frame as plain
  Python values, every missing value `None` (never pandas' NA or NaN).
- ``fleet_groups``: Runners folded into a few groups (by platform beyond eight runner keys),
  so a page of 10,000 runners draws a few panels and matrix columns, naming every runner's
  group.
- ``matrix_html``: report.html's matrix: scheme x path rows, a column per runner or group;
  each cell's verdict, per-suite counts, linear median SQNR and its change since baseline.
- ``stack_section``: The page's provenance section: one row per distinct software stack
  (torch, qharness, harness and engine commits, plugin and engine versions) with its runners.
- ``csp``: The HTML page with its styles and plots as same-origin files, for a strict
  Content-Security-Policy (Jenkins).
- ``annotations``: Regressions and new failures as GitHub Actions annotations, one per
  group.
- ``grouping``: The summary's regressions and failures grouped by platform, scheme and path
  before tests; runner paths made relative.
- ``escape``, ``markdown``, ``html_page``, ``plots``: Output: escaping per format;
  `summary.md` and the text report; the self-contained HTML page; matplotlib plots as base64
  PNG.
- ``render``: The single-file text report of `report --results` (and what `run` prints),
  rendered from the run's digest.
- ``doc_facts``: Counts, sizes and tables the docs state (store per group, case grids, the
  history columns), generated into marked blocks; a self-test fails on a stale doc.
"""
