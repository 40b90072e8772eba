"""Opening SQLite connections that can load sqlite-vec, in WAL mode.

The standard library's sqlite3 cannot load extensions on many Pythons, so the first module
that can is chosen: the stdlib one when it can, else pysqlite3, else sqlean.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import sqlite_vec

from pocketmcp import private
from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.engine import CANDIDATES, chose


@cache
def sqlite_module() -> ModuleType:
    """The first sqlite3-compatible module whose connections can load sqlite-vec."""
    tried: list[str] = []
    for name in CANDIDATES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            tried.append(f"{name}: not installed")
            continue
        if not hasattr(module.Connection, "enable_load_extension"):
            tried.append(f"{name}: cannot load extensions")
            continue
        try:
            probe = module.connect(":memory:")
            try:
                _load_vec(probe)
                fts5 = probe.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
                if not fts5.fetchone()[0]:
                    tried.append(f"{name}: built without FTS5")
                    continue
            finally:
                probe.close()
        except Exception as exc:  # a foreign module's failure, reported below
            tried.append(f"{name}: {exc}")
            continue
        chose(module)
        return module
    raise StoreError(
        "no sqlite3 module here can load the sqlite-vec extension ("
        + "; ".join(tried)
        + "). Install one with `pip install sqlean-py`."
    )


def _load_vec(conn: Any) -> None:
    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def sqlite_errors() -> tuple[type[Exception], ...]:
    """The Error classes of every sqlite module in use, to translate at the boundary."""
    return (sqlite3.Error, sqlite_module().Error)


def _writer_connector(path: Path) -> Callable[[], Any]:
    def connect() -> Any:
        module = sqlite_module()
        conn = module.connect(str(path), timeout=30.0, isolation_level=None,
                              check_same_thread=False)
        _load_vec(conn)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA wal_autocheckpoint=1000")
        return conn

    return connect


def _reader_connector(path: Path) -> Callable[[], Any]:
    def connect() -> Any:
        module = sqlite_module()
        uri = path.resolve().as_uri() + "?mode=ro"
        conn = module.connect(uri, uri=True, timeout=30.0, isolation_level=None,
                              check_same_thread=False)
        _load_vec(conn)
        conn.execute("PRAGMA busy_timeout=30000")
        # Setting temp_store drops temporary tables, and query_only forbids making them.
        conn.execute("PRAGMA temp_store=MEMORY")
        # Every occurrence of a term in the chunks, for keyword scoring (keywords/bm25.py).
        conn.execute("CREATE VIRTUAL TABLE temp.pocketmcp_chunk_instances "
                     "USING fts5vocab(main, chunks_fts, instance)")
        conn.execute("PRAGMA query_only=ON")
        return conn

    return connect


def open_sync_writer(path: Path) -> Any:
    """A blocking writer connection (used by the writer's worker thread and by tools)."""
    private.file(path)  # 0600 before SQLite makes it (and its -wal and -shm alike)
    try:
        return _writer_connector(path)()
    except sqlite_errors() as exc:
        raise StoreError(f"cannot open {path} for writing: {exc}") from exc


def open_sync_reader(path: Path) -> Any:
    if not path.exists():
        raise StoreError(f"no index at {path}; run `pocketmcp index` first")
    try:
        return _reader_connector(path)()
    except sqlite_errors() as exc:
        raise StoreError(f"cannot open {path} for reading: {exc}") from exc


def id_list(ids: Any) -> str:
    """Ids as one JSON argument, for `IN (SELECT value FROM json_each(?))`: SQLite limits
    the number of arguments, not the length of one."""
    return msgspec.json.encode([int(i) for i in ids]).decode()
