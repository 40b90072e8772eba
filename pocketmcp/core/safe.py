"""Making strings safe for JSON-RPC and SQLite. Pure functions."""

from __future__ import annotations

import re
from typing import Any

# C0 controls except tab, newline and carriage return; DEL; C1 controls.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def safe_text(text: str) -> str:
    """`text` without lone surrogates (as U+FFFD) and without control characters."""
    if _SURROGATE.search(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return _CONTROLS.sub("", text)


def safe(value: Any) -> Any:
    """`safe_text` applied to every string inside dicts, lists and tuples."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe(k): safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe(v) for v in value]
    return value


def is_clean_name(name: str) -> bool:
    """False for file names that are not valid UTF-8 (Python keeps such bytes as surrogates)."""
    return _SURROGATE.search(name) is None


def preview(text: str, limit: int = 240) -> str:
    """The text on one line, cut at a word boundary near `limit` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    return flat[: cut if cut > limit // 2 else limit].rstrip() + "…"
