"""The one boundary between report frames and renderers: missing values become ``None``.

pandas spells a missing value as ``NA`` (string columns; ``bool(NA)`` raises), ``NaN``
(object and float columns; truthy, printed ``nan``) or ``NaT``, depending on its version and
the column's dtype: a results field that is ``null`` (a passed test's ``reason``, a failure
without a repro bundle) must reach no renderer in any of those forms. Rows leave a frame for
a renderer only through `plain_rows`, whose values are plain Python: ``str``, ``int``,
``float``, ``bool`` or ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd


def plain(value: Any) -> Any:
    """``value`` as a plain Python object; every missing-value marker becomes ``None``."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def plain_text(value: Any) -> str | None:
    """An optional text field: ``None`` when missing, else its ``str``."""
    value = plain(value)
    return None if value is None else str(value)


def plain_rows(frame: pd.DataFrame, columns: Iterable[str]) -> list[dict[str, Any]]:
    """``columns`` of every row of ``frame`` as dictionaries of plain values."""
    names = list(columns)
    values = zip(*(frame[c].tolist() for c in names), strict=True) if names else ()
    return [{c: plain(v) for c, v in zip(names, row, strict=True)} for row in values]


def column_values(frame: pd.DataFrame, column: str) -> list[Any]:
    """One column of ``frame`` as plain values (`plain`), for loops over many rows."""
    return [plain(v) for v in frame[column].tolist()]
