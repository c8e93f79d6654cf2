"""Strings from results files, made inert for every output they are written into.

Scheme, path, platform and test names come from plugins and failure reasons from
exceptions: any of them may hold newlines, Markdown, HTML, terminal escape sequences or
bidirectional-text controls. Every string from a results file reaches an output through
one of these, all built on `_fold` (whitespace folded to single spaces, so nothing starts a
line of its own; control and invisible formatting characters shown as ``\\u202e``-style
text, so no escape sequence reaches a terminal and no bidi override reorders what is read):

- `one_line`: plain text, with ``<`` and ``&`` as entities (no tag survives a later
  rendering as HTML or Markdown); the greppable regression lines of `report --baseline`.
- `md_inline`: one Markdown-inert line (no new sections, links, emphasis, tags, cells):
  `summary.md`, the Markdown report, the text report and what `run` prints.
- `html_text`: `html.escape`, quotes included: `report.html`.
- `terminal_line`: one plain line for a terminal (no entities: nothing renders it later):
  `run`'s skips by reason, `repro`'s printout of a bundle (which comes from another machine).
"""

from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~!])")
_WHITESPACE = re.compile(r"\s+")
# C0 and C1 controls (ESC, BEL, ...; whitespace is folded first), DEL, and the invisible
# formatting characters that reorder or hide text: bidi embeddings, overrides and isolates,
# marks, zero-width characters, the BOM.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _shown(match: re.Match[str]) -> str:
    return f"\\u{ord(match[0]):04x}"


def _fold(text: object, limit: int | None) -> str:
    flat = _UNSAFE.sub(_shown, _WHITESPACE.sub(" ", str(text)).strip())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


def one_line(text: object, limit: int = 300) -> str:
    """One inert plain-text line, cut at ``limit``: see the module doc."""
    return _fold(text, limit).replace("&", "&amp;").replace("<", "&lt;")


def terminal_line(text: object, limit: int = 300) -> str:
    """One line safe to print on a terminal: see the module doc."""
    return _fold(text, limit)


def md_inline(text: object, limit: int = 300) -> str:
    """One Markdown-inert line: special characters backslash-escaped, ``<``/``&`` as entities."""
    return _MD_SPECIAL.sub(r"\\\1", one_line(text, limit))


def html_text(text: object, limit: int | None = None) -> str:
    """HTML-escaped text (quotes included) on one line, cut at ``limit`` when given."""
    return html.escape(_fold(text, limit), quote=True)
