"""An index's own search tuning: the fusion weight `pocketmcp check-search --apply` chose
from the index's own documents, kept in a small file beside an index file
(`INDEX.search.json`, `{"vector_weight": 0.6}`) and used by every search of that index that
does not give its tuning. A Postgres index has no such file: its searches use the defaults.
"""

from __future__ import annotations

import json
import os
import time
from functools import lru_cache
from pathlib import Path

import msgspec

from pocketmcp.errors import InvalidRequest
from pocketmcp.search.fuse import DEFAULT_PARAMS, Params
from pocketmcp.store.api import ReadIndex

RECHECK_S = 1.0  # a tuning file's change is seen by searches within this
# tuning file -> (when it was last looked at, its mtime then (None: none), its tuning)
_cache: dict[Path, tuple[float, int | None, Params]] = {}


@lru_cache(maxsize=64)
def tuning_path(index_file: Path) -> Path:
    """The tuning file beside the index file `index_file`."""
    return index_file.with_name(index_file.name + ".search.json")


def tuning_file(where: str) -> Path | None:
    """The tuning file of the index at `where` (None when the index is not a file)."""
    path = Path(where)
    return tuning_path(path) if path.is_file() else None


def params_of(index: ReadIndex) -> Params:
    """The index's tuning (the defaults when it has none, and for an index that is not a
    file). Its file is looked at once a second at most, and read again only when it
    changed: most searches make no system call here."""
    if index.file is None:
        return DEFAULT_PARAMS
    path = tuning_path(index.file)
    now = time.monotonic()
    known = _cache.get(path)
    if known is not None and now - known[0] < RECHECK_S:
        return known[2]
    try:
        stamp: int | None = os.stat(path).st_mtime_ns
    except OSError:
        stamp = None
    if known is not None and known[1] == stamp:
        params = known[2]
    elif stamp is None:
        params = DEFAULT_PARAMS
    else:
        try:
            fields = json.loads(path.read_text(encoding="utf-8"))
            params = msgspec.structs.replace(DEFAULT_PARAMS,
                                             vector_weight=float(fields["vector_weight"]))
        except (OSError, ValueError, KeyError, TypeError):
            params = DEFAULT_PARAMS  # unreadable: the defaults, as without one
    _cache[path] = (now, stamp, params)
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
