"""An index's own search tuning: the fusion weight `pocketmcp check-search --apply` chose
from the index's own documents, kept in a small file beside an index file
(`INDEX.search.json`, `{"vector_weight": 0.6}`) and used by every search of that index that
does not give its tuning. A Postgres index has no such file: its searches use the defaults.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec

from pocketmcp.errors import InvalidRequest
from pocketmcp.ops.ranking import DEFAULT_PARAMS, Params
from pocketmcp.store.api import ReadIndex

_cache: dict[str, tuple[int, Params]] = {}


def tuning_file(where: str) -> Path | None:
    """The tuning file of the index at `where` (None when the index is not a file)."""
    path = Path(where)
    return path.with_name(path.name + ".search.json") if path.is_file() else None


def params_of(index: ReadIndex) -> Params:
    """The index's tuning (the defaults when it has none); read again only when the file
    changed."""
    path = tuning_file(index.where) if index.where.startswith(("/", ".")) else None
    if path is None:
        return DEFAULT_PARAMS
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return DEFAULT_PARAMS
    known = _cache.get(str(path))
    if known is not None and known[0] == stamp:
        return known[1]
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        params = msgspec.structs.replace(DEFAULT_PARAMS,
                                         vector_weight=float(fields["vector_weight"]))
    except (OSError, ValueError, KeyError, TypeError):
        params = DEFAULT_PARAMS  # unreadable: the defaults, as without one
    _cache[str(path)] = (stamp, params)
    return params


def save_weight(where: str, weight: float) -> Path:
    """Keep `weight` as the fusion weight of the index at `where`."""
    if not 0.0 <= weight <= 1.0:
        raise InvalidRequest("the fusion weight must be from 0 to 1")
    path = tuning_file(where)
    if path is None:
        raise InvalidRequest(f"{where} is not an index file: its fusion weight cannot be kept "
                             "(Postgres indexes use the default)")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"vector_weight": weight}) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
