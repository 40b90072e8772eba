"""The named databases one process serves: separate indexes beside the main one (SQLite
files in the databases folder, or schemas beside the main one's on Postgres).

Each is read through its own ReadIndex and written by its own writer actor, started on the
first write (or by create_database, which makes the index) and fed by tool requests alone.
While another process holds a SQLite database's writer lock, its reads work here and its
writes are READ_ONLY (Postgres takes every process's writes). A database whose writer fails
is reported on that write; the next one starts a new writer.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.core.identity import Identity
from pocketmcp.errors import ModelMismatchError, PocketError, ReadOnly, Stopping, WriterBusyError
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.pipeline.writer import EventHook, WriterActor, WriterInbox
from pocketmcp.store import places
from pocketmcp.store.api import ReadIndex
from pocketmcp.store.registry import Registry, not_found

log = logs.get("pocketmcp.databases")


class _Database:
    def __init__(self, where: places.Where, index: ReadIndex) -> None:
        self.where = where
        self.index = index
        self.made = False  # a writer has made it (it cannot be dropped through the tools)
        self.checked = False  # its stored model was compared with this process's
        self.writer: WriterActor | None = None
        self.opening = anyio.Lock()
        self.done = anyio.Event()


class Databases:
    """Named databases by name: read indexes, and writer actors started on demand in `tg`."""

    def __init__(self, config: Config, registry: Registry, *, identity: Identity,
                 tg: anyio.abc.TaskGroup, on_event: EventHook | None) -> None:
        self._config = config
        self._registry = registry
        self._identity = identity
        self._tg = tg
        self._on_event = on_event
        self._open: dict[str, _Database] = {}
        self._stopping = False

    async def _get(self, name: str, *, create: bool = False) -> _Database:
        """Database `name`, its model checked; NotFound when it was never made (unless
        `create`)."""
        where = self._registry.where(name)
        db = self._open.get(name)
        if db is None or not db.made:
            made = await anyio.to_thread.run_sync(places.exists, where)
            if not made and not create:
                raise not_found(name)
            if db is None:
                db = self._open[name] = _Database(where, places.read_index(
                    where, self._identity.dim))
            db.made = made
        if db.made and not db.checked:
            stored = await db.index.run(lambda r: r.identity())
            if stored is not None and stored != self._identity:
                raise ModelMismatchError(db.index.where, stored.describe(),
                                         stored.differences(self._identity))
            db.checked = stored is not None
        return db

    async def reading(self, name: str) -> ReadIndex:
        """Database `name` for reading; NotFound when it was never created."""
        return (await self._get(name)).index

    async def writing(self, name: str, *, create: bool = False) -> tuple[ReadIndex, WriterInbox]:
        """Database `name` and the way to its writer, started now if need be (creating the
        index when `create`); READ_ONLY while another process holds its lock (SQLite)."""
        db = await self._get(name, create=create)
        async with db.opening:
            if self._stopping:
                raise Stopping("the server is shutting down; nothing was written")
            if db.writer is None:
                where = db.where
                try:
                    db.writer = await anyio.to_thread.run_sync(lambda: WriterActor.open(
                        where, self._identity,
                        queue_size=self._config.queue_size,
                        batch_files=self._config.write_batch_files, on_event=self._on_event))
                except WriterBusyError:
                    raise ReadOnly(f"database {name!r} is read-only here: another PocketMCP "
                                   f"process holds the writer lock of {where}") from None
                db.made = True
                self._tg.start_soon(self._run, name, db, name=f"pocketmcp.writer.{name}")
            return db.index, db.writer.requests

    async def _run(self, name: str, db: _Database) -> None:
        writer = db.writer
        assert writer is not None
        try:
            await writer.run(inflight=InFlight(), stats=Stats())
        except PocketError as exc:  # infrastructure of this file alone: the others go on
            log.error("writer_failed", database=name, error=str(exc))
        finally:
            writer.requests.close()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(writer.close_file)
            db.writer = None
            done, db.done = db.done, anyio.Event()
            done.set()

    async def create(self, name: str) -> tuple[str, bool]:
        """Make sure database `name` exists; (where it is: its file or its Postgres schema,
        whether this call created it). While another process holds its lock, that process
        has made (or is making) it."""
        where = self._registry.where(name)
        existed = await anyio.to_thread.run_sync(places.exists, where)
        shown = str(where.resolve()) if isinstance(where, Path) else where.describe()
        try:
            await self.writing(name, create=True)
        except ReadOnly:
            return shown, False
        return shown, not existed

    def stop(self) -> None:
        """Take no new writes; every writer commits what it has and stops."""
        self._stopping = True
        for db in self._open.values():
            if db.writer is not None:
                db.writer.requests.close()
                db.writer.stop_repair()

    async def wait_stopped(self) -> None:
        for db in list(self._open.values()):
            if db.writer is not None:
                await db.done.wait()

    def close(self) -> None:
        for db in self._open.values():
            db.index.close()
            if db.writer is not None:
                db.writer.close()
                db.writer = None
