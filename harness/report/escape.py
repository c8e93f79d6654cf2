"""Strings from results files, made inert for the format they are written into.

Scheme, path and test names come from plugins and failure reasons from exceptions: any of
them may hold newlines, Markdown or HTML. `md_inline` makes one Markdown table-safe line
(no new sections, links, emphasis or tags); `html_text` is `html.escape` after the same
folding of whitespace where one line is wanted.
"""

from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~!])")
_WHITESPACE = re.compile(r"\s+")


def one_line(text: object, limit: int = 300) -> str:
    """Fold all whitespace (newlines included) to single spaces; cut at ``limit``."""
    flat = _WHITESPACE.sub(" ", str(text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def md_inline(text: object, limit: int = 300) -> str:
    """One Markdown-inert line: special characters backslash-escaped, ``<``/``&`` as entities."""
    flat = one_line(text, limit)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


def html_text(text: object, limit: int | None = None) -> str:
    """HTML-escaped text (quotes included), folded to one line when ``limit`` is given."""
    return html.escape(str(text) if limit is None else one_line(text, limit), quote=True)
