"""The limits every value read from a results file, or a run's path, must hold.

Validation checks them once, where a file comes in, so no later step (the frame's int64
and float64 columns, Parquet's UTF-8 strings, the HTML and Markdown writers) meets a value
it cannot hold: integers within int64, number literals within float64 (``Infinity`` and
``NaN`` are the only non-finite values, and only as those literals), strings that are
valid UTF-8 (no lone surrogates from a ``\\ud800`` escape), and path names that decode.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INT64_DIGITS = len(str(INT64_MAX))  # 19: a longer literal is never read into an int


@dataclass(frozen=True)
class OutOfRange:
    """A number literal no later step could hold, kept as text so validation can name the
    field it is in (`value_problem`) instead of failing inside the JSON parser."""

    text: str
    limit: str  # "int64" or "float64"

    def problem(self) -> str:
        shown = (
            self.text if len(self.text) <= 24 else f"{self.text[:20]}... ({len(self.text)} digits)"
        )
        return f"is {shown}, outside {self.limit}, what reports hold"


def _parse_int(text: str) -> int | OutOfRange:
    """json's ``parse_int``: a literal past int64 is never read into an int (a
    100 000-digit literal would otherwise be Python's own ValueError)."""
    if len(text.lstrip("-")) > _INT64_DIGITS or not INT64_MIN <= int(text) <= INT64_MAX:
        return OutOfRange(text, "int64")
    return int(text)


def _parse_float(text: str) -> float | OutOfRange:
    """json's ``parse_float``: a literal that overflows float64 is never read as infinity
    (``Infinity`` is how a results file writes one)."""
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text, "float64")


def json_decoder() -> json.JSONDecoder:
    """The decoder results files are read with: number literals past the limits are kept
    as `OutOfRange`, which `value_problem` reports."""
    return json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float)


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be written as UTF-8 (a lone surrogate); None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate {text[exc.start]!r} at {exc.start}, not valid UTF-8"
    return None


def writable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) written as its
    ``\\udcff`` escape text: what a run records (a failure message holding a file name's
    undecodable bytes, say) is kept, readably, and never makes its results file refused."""
    if isinstance(value, str):
        return (
            value
            if text_problem(value) is None
            else value.encode("utf-8", "backslashreplace").decode()
        )
    if isinstance(value, dict):
        return {writable(k): writable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [writable(v) for v in value]
    return value


def value_problem(value: Any, where: str) -> str | None:
    """The first value inside ``value`` (keys too) that breaks the limits, named by its
    place from ``where``; None when all hold. Iterative: nesting costs no recursion."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, OutOfRange):
            return f"{place} {item.problem()}"
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"{place} {problem}"
        elif isinstance(item, int) and not isinstance(item, bool):
            if not INT64_MIN <= item <= INT64_MAX:
                return f"{place} is outside int64, what reports hold"
        elif isinstance(item, dict):
            for key, inner in item.items():
                problem = text_problem(str(key))
                if problem:
                    return f"{place} has a key that {problem}"
                stack.append((inner, f"{place}.{key}"))
        elif isinstance(item, list):
            stack.extend((inner, f"{place}[{i}]") for i, inner in enumerate(item))
    return None


def path_problem(path: Path) -> str | None:
    """Why ``path`` cannot be named in a report or stored as a run id (bytes that are not
    UTF-8 in a directory name); None when it can."""
    raw = str(path)
    if text_problem(raw) is None:
        return None
    shown = raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return f"path {shown} is not valid UTF-8; rename it"
