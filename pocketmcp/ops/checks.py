"""Checks of tool arguments that the schemas cannot express; each failure names the fix."""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

from pocketmcp.core.safe import safe, safe_text
from pocketmcp.errors import InvalidRequest

MAX_METADATA_BYTES = 16_384


def check_library(name: str | None, default: str) -> str:
    """A library name (NFC, 1-100 characters, no control characters), or `default`."""
    if name is None:
        return default
    name = unicodedata.normalize("NFC", name.strip())
    if not name or len(name) > 100 or any(unicodedata.category(c)[0] == "C" for c in name):
        raise InvalidRequest("library must be 1-100 characters without control characters")
    # What a top folder could be called: no path separators, not "." or "..".
    if "/" in name or "\\" in name or name.strip(".") == "":
        raise InvalidRequest(f"library {safe_text(name)!r} is not valid: a library name holds "
                             "no '/' or '\\' and is not made of dots only")
    return name


def check_score(value: float | None, what: str = "score_threshold") -> float | None:
    """A finite number, or None."""
    if value is not None and not math.isfinite(value):
        raise InvalidRequest(f"{what} must be a finite number, not {value}")
    return value


def check_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """Metadata to store: JSON of at most MAX_METADATA_BYTES, strings made safe."""
    if not metadata:
        return {}
    clean_meta = safe(metadata)
    if len(json.dumps(clean_meta, ensure_ascii=False)) > MAX_METADATA_BYTES:
        raise InvalidRequest(f"metadata is larger than {MAX_METADATA_BYTES} bytes as JSON")
    return dict(clean_meta)

