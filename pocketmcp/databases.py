"""The named databases one process serves: separate index files beside the main one.

Each is read through its own ReadIndex and written by its own writer actor, started on the
first write (or by create_database, which makes the file) and fed by tool requests alone.
While another process holds a database's writer lock, its reads work here and its writes are
READ_ONLY. A database whose writer fails is reported on that write; the next one starts a new
writer.
"""

from __future__ import annotations

import anyio
import anyio.abc

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.core.identity import Identity
from pocketmcp.errors import ModelMismatchError, PocketError, ReadOnly, Stopping, WriterBusyError
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.pipeline.writer import EventHook, WriterActor, WriterInbox
from pocketmcp.store.readers import ReadIndex
from pocketmcp.store.registry import Registry

log = logs.get("pocketmcp.databases")


class _Database:
    def __init__(self, index: ReadIndex) -> None:
        self.index = index
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

    async def _get(self, name: str) -> _Database:
        db = self._open.get(name)
        if db is None:
            db = self._open[name] = _Database(ReadIndex(self._registry.path(name),
                                                        self._identity.dim))
        if not db.checked and db.index.path.is_file():
            stored = await db.index.run(lambda r: r.identity())
            if stored is not None and stored != self._identity:
                raise ModelMismatchError(db.index.path, stored.describe(),
                                         stored.differences(self._identity))
            db.checked = stored is not None
        return db

    async def reading(self, name: str) -> ReadIndex:
        """Database `name` for reading; NotFound when it was never created."""
        self._registry.existing(name)
        return (await self._get(name)).index

    async def writing(self, name: str, *, create: bool = False) -> tuple[ReadIndex, WriterInbox]:
        """Database `name` and the way to its writer, started now if need be (creating the
        file when `create`); READ_ONLY while another process holds its lock."""
        (self._registry.path if create else self._registry.existing)(name)
        db = await self._get(name)
        async with db.opening:
            if self._stopping:
                raise Stopping("the server is shutting down; nothing was written")
            if db.writer is None:
                path = db.index.path
                try:
                    db.writer = await anyio.to_thread.run_sync(lambda: WriterActor.open(
                        path, self._identity,
                        queue_size=self._config.queue_size,
                        batch_files=self._config.write_batch_files, on_event=self._on_event))
                except WriterBusyError:
                    raise ReadOnly(f"database {name!r} is read-only here: another PocketMCP "
                                   f"process holds the writer lock of {path}") from None
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
        """Make sure database `name` exists; (its file, whether this call created it). While
        another process holds its lock, that process has made (or is making) the file."""
        path = self._registry.path(name)
        existed = path.is_file()
        try:
            await self.writing(name, create=True)
        except ReadOnly:
            return str(path.resolve()), False
        return str(path.resolve()), not existed

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
