"""Small text helpers for the templates: highlighted passages and sizes."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from pocketmcp.core.keywords import stems, terms

_WORD = re.compile(r"\w+")


def highlight(text: str, query: str) -> Markup:
    """`text` escaped, with the words that share a stem with the query's words in <mark>
    ("starters" marks "starter", "starting" marks "start")."""
    wanted = tuple(sorted({s for s in stems([w for w in terms(query) if len(w) > 1])
                           if len(s) > 1}, key=len, reverse=True))
    if not wanted:
        return escape(text)
    out: list[str] = []
    last = 0
    for found in _WORD.finditer(text):
        if not found.group().lower().startswith(wanted):
            continue
        out.append(str(escape(text[last:found.start()])))
        out.append(f"<mark>{escape(found.group())}</mark>")
        last = found.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
