"""An index's own search tuning: the fusion weight `pocketmcp check-search --apply` chose
from the index's own documents, kept in a small file of the index's own (`search.json` of its
place: `INDEX.search.json` beside a SQLite index, `{"vector_weight": 0.6}`) and used by every
search of that index that does not give its tuning, whichever store holds it.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from pathlib import Path

import msgspec

from pocketmcp import private
from pocketmcp.errors import InvalidRequest
from pocketmcp.search.fuse import DEFAULT_PARAMS, Params
from pocketmcp.store.api import ReadIndex

TUNING = "search.json"  # the file's name among the index's own (Place.beside)
RECHECK_S = 1.0  # a tuning file's change is seen by searches within this
# tuning file -> (when it was last looked at, its mtime then (None: none), its tuning)
_cache: dict[Path, tuple[float, int | None, Params]] = {}
# index -> its tuning file, named once (naming a Postgres index's may make its folder)
_files: weakref.WeakKeyDictionary[ReadIndex, Path] = weakref.WeakKeyDictionary()


def tuning_file(index: ReadIndex) -> Path:
    """The tuning file of `index`."""
    path = _files.get(index)
    if path is None:
        path = _files[index] = index.beside(TUNING)
    return path


def params_of(index: ReadIndex) -> Params:
    """The index's tuning (the defaults when it has none). Its file is looked at once a
    second at most, and read again only when it changed: most searches make no system call
    here."""
    path = tuning_file(index)
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


def save_weight(index: ReadIndex, weight: float) -> Path:
    """Keep `weight` as the fusion weight of `index`."""
    if not 0.0 <= weight <= 1.0:
        raise InvalidRequest("the fusion weight must be from 0 to 1")
    path = tuning_file(index)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    private.file(tmp)
    tmp.write_text(json.dumps({"vector_weight": weight}) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
