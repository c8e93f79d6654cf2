"""The model of a run and of a night: what every output renders, built from what
`harness.report.reading` reads.

Modules, each with its one job:

- ``digest``: One run folded, record by record, into what the reports show of it
  (`RunDigest`): outcome counts, its matrix cells, skip counts per reason, its failing
  tests, the plots' per-run SQNR medians and memory peaks, its benchmark rows, the text
  report's tables; no record is kept. The one model of a run.
- ``record_tables``: The records of one run as the text report groups them (outcomes and
  executions per suite and path, SQNR and peaks per scheme and path, by their printed
  names), folded into the digest.
- ``identity``: The report keyed by runner (`platform@label`), and warnings where runs share
  a key, a baseline came from another host or is missing, or the stack (torch, CUDA/HIP,
  driver, harness and engine commits and versions) changed since it.
- ``regress``: Regression rules, one merge of two runs (linear), first run of each
  regression; the metric rules come from the field table's rows.
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
- ``fleet_groups``: Runners folded into a few groups (by platform beyond eight runner keys),
  so a page of 10,000 runners draws a few panels and matrix columns, naming every runner's
  group.
- ``escape``: Strings from results files made inert, per format (Markdown, HTML, terminal),
  for every output and for the names the text report groups by.
"""
