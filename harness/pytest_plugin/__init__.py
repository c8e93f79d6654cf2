"""The parts of the qharness pytest plugin (`harness.plugin`, the ``pytest11`` entry point).

`harness.plugin` keeps the options, the activation rule and the fixtures themselves
(whose names are a contract); the verdict policy is `verdicts`.

Modules, each with its one job:

- ``recorder``: one record per test (case fields, outcome, skip reason, metrics), merged
  across xdist workers; the results file, repro bundles, the skip summary.
- ``execution``: a record's ``execution`` on a simulated platform (what its case's path
  ran, or ``not-run`` for a skipped test).
- ``pinning``: GPUs and cores per pytest-xdist worker (a GPU per worker).
- ``verdicts``: how a case's named checks and known engine findings become pass, fail or
  xfail.
- ``goldens``: a missing or stale golden fails the test with the refresh command.
- ``fixture_types``: the types of the fixtures, for the suites' signatures.
- ``xdist_status``: pytest-xdist's status line shown once per change, so "bringing up
  nodes..." is not written twice under ``-q`` on a pipe.
"""
