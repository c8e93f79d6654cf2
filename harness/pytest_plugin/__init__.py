"""The parts of the qharness pytest plugin (`harness.plugin`, the ``pytest11`` entry point).

`recorder`: one record per test and the results file; `pinning`: GPUs and cores per
pytest-xdist worker; `verdicts`: how a case's named checks and known engine findings become
pass, fail or xfail; `fixture_types`: the types of the fixtures, for the suites' signatures.
`harness.plugin` keeps the options, the activation rule and the fixtures themselves.
"""
