"""The arguments ``run`` hands to pytest, and the ``-k`` among them: its benchmarks take the
same selection, and an expression pytest cannot parse is refused before a run starts."""

from __future__ import annotations

import argparse
import re

from harness.errors import UsageError


def passed_to_pytest(args: argparse.Namespace) -> list[str]:
    """Extra pytest arguments, without the ``--`` that may separate them from ours."""
    extra = list(getattr(args, "pytest_args", None) or [])
    return extra[1:] if extra[:1] == ["--"] else extra


def selection(pytest_args: list[str]) -> list[str]:
    """The ``-k EXPR`` of the suites' arguments, which also selects the benchmarks."""
    for i, arg in enumerate(pytest_args):
        if arg == "-k" and i + 1 < len(pytest_args):
            return ["-k", pytest_args[i + 1]]
        joined = re.fullmatch(r"-k(.+)", arg)  # pytest also takes -kEXPR
        if joined:
            return ["-k", joined[1]]
    return []


def check_keyword_expression(pytest_args: list[str]) -> None:
    """Refuse a ``-k`` pytest cannot parse before any run directory exists: serially pytest
    stops with a usage error, but under xdist every worker crashes on it (INTERNALERROR).
    Scheme variants carry an ``@`` that the -k grammar has no place for."""
    keyword = selection(pytest_args)
    if not keyword:
        return
    try:
        from _pytest.mark import expression
    except ImportError:  # a pytest without this module: pytest itself will judge
        return
    # pytest 9 raises SyntaxError; older ones their own ParseError
    errors = (SyntaxError, getattr(expression, "ParseError", SyntaxError))
    try:
        expression.Expression.compile(keyword[1])
    except errors as exc:
        hint = ""
        if "@" in keyword[1]:
            hint = (
                "; -k cannot hold '@': select a scheme variant such as "
                "w_mxfp4_a_mxfp4@ceil with -k 'w_mxfp4_a_mxfp4 and ceil'"
            )
        raise UsageError(f"-k {keyword[1]!r}: {exc}{hint}") from None
