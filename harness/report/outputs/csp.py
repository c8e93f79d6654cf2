"""The HTML report in a form a strict Content-Security-Policy allows.

Jenkins serves archived HTML with ``default-src 'none'; img-src 'self'; style-src 'self'``:
inline ``<style>``, ``style=`` attributes and ``data:`` images are blocked, so the page
renders unstyled and without plots. `write_csp_safe` writes the same page with its styles
in ``<name>.css`` and its plots as PNG files in ``<name>-assets/``, all same-origin.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path

from harness.store.atomic import write_bytes_atomic, write_text_atomic

STYLE_ELEMENT = re.compile(r"<style>(.*?)</style>", re.S)
DATA_IMAGE = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]*)"')
TAG = re.compile(r"<[a-zA-Z][^<>]*>")
STYLE_ATTRIBUTE = re.compile(r'\sstyle="([^"]*)"')
CLASS_ATTRIBUTE = re.compile(r'\sclass="([^"]*)"')
SELF_CLOSING = re.compile(r"/>\Z")


def _classes_for_inline_styles(html: str) -> tuple[str, list[str]]:
    """Each distinct ``style="..."`` attribute becomes a class ``qh-inline-N``."""
    rules: dict[str, str] = {}

    def tag(match: re.Match[str]) -> str:
        text = match.group(0)
        found = STYLE_ATTRIBUTE.search(text)
        if found is None:
            return text
        name = rules.setdefault(found.group(1), f"qh-inline-{len(rules)}")
        text = STYLE_ATTRIBUTE.sub("", text, count=1)
        if CLASS_ATTRIBUTE.search(text):
            return CLASS_ATTRIBUTE.sub(lambda m: f' class="{m.group(1)} {name}"', text, count=1)
        end = "/>" if SELF_CLOSING.search(text) else ">"
        return text[: -len(end)] + f' class="{name}"' + end

    html = TAG.sub(tag, html)
    return html, [f".{name}{{{css}}}" for css, name in rules.items()]


def write_csp_safe(
    html: str, out: Path, write_page: Callable[[Path, str], object] = write_text_atomic
) -> list[Path]:
    """Write ``html`` to ``out`` (through ``write_page``: the command's output policy) with
    its styles and images as same-origin files; returns the files written besides ``out``."""
    out = Path(out)
    assets = out.parent / f"{out.stem}-assets"
    styles = "\n".join(STYLE_ELEMENT.findall(html))
    html = STYLE_ELEMENT.sub("", html)
    html, inline_rules = _classes_for_inline_styles(html)
    css = out.with_suffix(".css")
    written = [css]
    images: list[bytes] = []

    def image(match: re.Match[str]) -> str:
        images.append(base64.b64decode(match.group(1)))
        return f'src="{assets.name}/plot-{len(images)}.png"'

    html = DATA_IMAGE.sub(image, html)
    html = html.replace("</head>", f'<link rel="stylesheet" href="{css.name}"></head>', 1)
    if images:
        assets.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(images, start=1):
        path = assets / f"plot-{i}.png"
        write_bytes_atomic(path, data)
        written.append(path)
    write_text_atomic(css, styles + "\n" + "\n".join(inline_rules) + "\n")
    write_page(out, html)
    return written
