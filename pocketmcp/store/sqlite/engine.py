"""Which SQLite library this process opens its indexes with, found cheaply.

Two copies of SQLite in one process must never open the same file: neither sees the other's
connections, so one closing its descriptor drops the POSIX locks the other holds, and one that
believes itself the last reader may truncate the shared-memory file the other has mapped (a
bus error). Every connection to an index therefore goes through one library: the one
`connect.sqlite_module` chooses (the first of CANDIDATES that can load sqlite-vec).
`reading_module` gives that library without loading sqlite-vec or numpy, for the one-row
reads a command or a stdio bridge makes before it decides to load the engine.
"""

from __future__ import annotations

import importlib
from types import ModuleType

CANDIDATES = ("sqlite3", "pysqlite3.dbapi2", "sqlean")

_chosen: list[ModuleType] = []  # the engine's choice, once made (connect.sqlite_module)


def chose(module: ModuleType) -> None:
    """Called by the engine with the module it opens indexes with."""
    _chosen[:] = [module]


def reading_module() -> ModuleType:
    """The engine's module once chosen; before that, the first candidate installed that can
    load extensions (what the engine will choose wherever sqlite-vec loads)."""
    if _chosen:
        return _chosen[0]
    for name in CANDIDATES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module.Connection, "enable_load_extension"):
            return module
    return importlib.import_module("sqlite3")  # the engine will say what is missing
