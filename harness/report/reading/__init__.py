"""Reading a run: results files, run directories and the history, as they are read and
written, each value checked once where it is read.

Modules, each with its one job:

- ``rundir``: Run ids, the run directory's files, the `latest` pointer and `latest.json` (a
  link through it, so a kill never splits them); a new run sweeps killed runs' temp files.
- ``limits``: The limits every value read from a results file or run path must keep, checked
  once where it is read (integers within int64, numbers within float64, text without lone
  surrogates, paths that decode as UTF-8), so no later step (history, report) meets one it
  cannot hold.
- ``schema``: The field table: one row per results-record field (where it lives, the JSON
  type validation holds it to, its history dtype, which way it regresses and past what
  change, its doc), read by validation, the history columns, the regression rules, the
  model section, the recorder and docs/HISTORY.md.
- ``results``: The results file (`qharness.results/1`), written atomically, `partial` when
  interrupted; read and validated.
- ``stream``: A results file read record by record (the top-level object value by value, a
  megabyte at a time, each record checked by the results reader's rules); a file it cannot
  vouch for is read whole, so every problem keeps `read_results`' message.
- ``frame``, ``runs``: Results (and benchmark JSON) as one row per test per run; loading one
  run as a frame (the history, a test-by-test comparison) and adding runs to the history.
- ``plain``: The one boundary between frames and renderers: rows leave a frame as plain
  Python values, every missing value `None` (never pandas' NA or NaN).
- ``provenance``: What each run records of where its numbers came from: harness and engine
  commits, plugin versions, and the versions of the engines the installed adapters declare
  (entry-point group `qharness.engines`).
"""
