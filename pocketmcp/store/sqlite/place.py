"""Where a SQLite index is: its file, with its vector file, write-ahead log and writer lock
beside it, and the folder its named databases are kept in."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from filelock import FileLock, Timeout

from pocketmcp.core.identity import Identity
from pocketmcp.errors import StoreError
from pocketmcp.store.folder import FOLDER_KEY, FolderRecord
from pocketmcp.store.sqlite.files import BESIDE, beside, lock_path

# The engine (SQLite, numpy, the vector file) is imported by the methods that open the index:
# naming a place, as every command and a stdio bridge do, loads none of it.
if TYPE_CHECKING:
    from pocketmcp.store.sqlite.reads import SqliteIndex
    from pocketmcp.store.sqlite.writes import SqliteWriter


class SqlitePlace(msgspec.Struct, frozen=True):
    path: Path
    databases_dir: Path  # where named databases are, as `<name>.db`

    def describe(self) -> str:
        return str(self.path.resolve())

    def beside(self, name: str) -> Path:
        return beside(self.path, "." + name)  # index.db.token, index.db.server.json, ...

    def own_files(self) -> list[Path]:
        name = self.path.name
        with contextlib.suppress(OSError):
            return sorted(p for p in self.path.parent.iterdir() if p.name.startswith(name))
        return []

    def exists(self) -> bool:
        return self.path.is_file()

    def identity(self) -> Identity | None:
        from pocketmcp.store.sqlite.reads import recorded_identity  # the engine, see above

        return recorded_identity(self.path) if self.path.is_file() else None

    def folder(self) -> FolderRecord | None:
        # One row, read without the engine: a stdio server told no folder asks it before
        # choosing to bridge, and loads no sqlite-vec or numpy. With the engine's own SQLite
        # library, never a second copy of SQLite (store/sqlite/engine.py says why).
        from pocketmcp.store.sqlite.engine import reading_module

        sqlite = reading_module()
        if not self.path.is_file():
            return None
        try:
            conn = sqlite.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True,
                                  timeout=5)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = ?",
                                   (FOLDER_KEY,)).fetchone()
            finally:
                conn.close()
        except sqlite.OperationalError as exc:
            if "no such table" in str(exc):
                return None  # not made yet
            raise StoreError(f"cannot read {self.describe()}: {exc}") from exc
        except sqlite.DatabaseError as exc:
            raise StoreError(f"cannot read {self.describe()}: {exc}") from exc
        return FolderRecord.decode(None if row is None else str(row[0]))

    def reader(self, dim: int, *, root: Path | None = None) -> SqliteIndex:
        from pocketmcp.store.sqlite.reads import SqliteIndex  # the engine, see above

        return SqliteIndex(self.path, dim, root=root)

    def writer(self, identity: Identity, *, rebuild: bool = False) -> SqliteWriter:
        from pocketmcp.store.sqlite.writes import SqliteWriter  # the engine, see above

        return SqliteWriter(self.path, identity, rebuild=rebuild)

    def writer_held(self) -> bool:
        if not self.path.parent.is_dir():
            return False
        probe = FileLock(str(lock_path(self.path)), blocking=False, thread_local=False,
                         mode=0o600)
        try:
            probe.acquire()
        except Timeout:
            return True
        probe.release()
        return False

    def size(self) -> int:
        size = 0
        for part in (self.path, beside(self.path, "-wal")):
            with contextlib.suppress(OSError):  # no log yet, or the index is not made yet
                size += part.stat().st_size
        return size

    def holds(self, path: Path) -> bool:
        # The index, what it is made of, and any file named after it that is there (its
        # token, discovery file, locks, log, tuning: `beside`).
        path, own = path.resolve(), self.path.resolve()
        return path == own or path in {beside(own, suffix) for suffix in BESIDE} or (
            path.parent == own.parent and path.name.startswith(own.name + ".")
            and path.exists())

    def backup(self, target: Path) -> int:
        from pocketmcp.store.sqlite.archive import backup  # the engine, see above

        if not self.path.is_file():
            raise StoreError(f"no index at {self.describe()}; run `pocketmcp index` first")
        return backup(self.path, target)

    def drop(self) -> None:
        for path in (self.path, *(beside(self.path, suffix) for suffix in BESIDE)):
            path.unlink(missing_ok=True)

    def database(self, name: str) -> SqlitePlace:
        return SqlitePlace((self.databases_dir / f"{name}.db").absolute(), self.databases_dir)

    def throwaway(self, folder: Path, file: Path | None = None) -> SqlitePlace:
        return SqlitePlace(file or folder / "index.db", folder / "databases")
