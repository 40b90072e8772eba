"""Small text helpers for the templates: highlighted passages, sizes, dates, paths and the
indexing phase in words."""

from __future__ import annotations

import datetime as dt
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


def when(stamp: str | None) -> str:
    """An ISO date and time as `2026-11-26 20:13 UTC` (two words a line may break between);
    anything else as given."""
    if not stamp:
        return ""
    try:
        moment = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if moment.tzinfo is not None:
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M")


def path_breaks(path: str | None) -> Markup:
    """`path` escaped, with a line-break opportunity after each `/`, so a narrow column wraps
    it between folders rather than inside a name."""
    return Markup("/<wbr>".join(str(escape(part)) for part in (path or "").split("/")))


_PHASES = {
    "starting": "Starting",
    "loading_model": "Loading the model",
    "indexing": "Indexing: new and changed files are being added",
    "failed": "Stopped by an error (see Last error)",
}


def phase_text(phase: str, watching: bool) -> str:
    """The indexing phase as a person would say it."""
    if phase == "ready":
        return "Ready: the index is up to date with the folder" if watching else "Ready"
    return _PHASES.get(phase, phase.replace("_", " ").capitalize())
