"""Canaries: deliberately faulty plugins, one per bug class, that the suites must catch.

Each canary is a realistic implementation (it returns plausible numbers) that differs from
a correct plugin in exactly one respect. The runner (``python -m tests.canaries``, a step of
``python -m harness selftest``) registers them through the real entry-point groups in a
throwaway distribution, runs only the suite tests each one can affect, and reports which
checks caught it. They are never registered outside that run.
"""
