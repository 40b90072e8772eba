"""The named databases one process serves: separate index files beside the main one.

Each is read through its own ReadIndex and written by its own writer actor, started on the
first write (creating its file) and fed by tool requests alone. While another process holds a
database's writer lock, its reads work here and its writes are READ_ONLY.
"""

from __future__ import annotations

import anyio
import anyio.abc

from pocketmcp.config import Config
from pocketmcp.errors import ReadOnly, Stopping, WriterBusyError
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import EventHook, WriterActor, WriterInbox
from pocketmcp.store.readers import ReadIndex
from pocketmcp.store.registry import Registry


class _Database:
    def __init__(self, index: ReadIndex) -> None:
        self.index = index
        self.pipeline: Pipeline | None = None
        self.opening = anyio.Lock()
        self.done = anyio.Event()


class Databases:
    """Named databases by name: read indexes, and writer actors started on demand in `tg`."""

    def __init__(self, config: Config, registry: Registry, *, model_id: str, dim: int,
                 tg: anyio.abc.TaskGroup, on_event: EventHook | None) -> None:
        self._config = config
        self._registry = registry
        self._model_id = model_id
        self._dim = dim
        self._tg = tg
        self._on_event = on_event
        self._open: dict[str, _Database] = {}
        self._stopping = False

    def _get(self, name: str) -> _Database:
        db = self._open.get(name)
        if db is None:
            db = self._open[name] = _Database(ReadIndex(self._registry.path(name), self._dim))
        return db

    def reading(self, name: str) -> ReadIndex:
        """Database `name` for reading; NotFound when it was never created."""
        self._registry.existing(name)
        return self._get(name).index

    async def writing(self, name: str, *, create: bool = False) -> tuple[ReadIndex, WriterInbox]:
        """Database `name` and the way to its writer, started now if need be (creating the
        file when `create`); READ_ONLY while another process holds its lock."""
        (self._registry.path if create else self._registry.existing)(name)
        db = self._get(name)
        async with db.opening:
            if self._stopping:
                raise Stopping("the server is shutting down")
            if db.pipeline is None:
                path = db.index.path
                try:
                    actor = await anyio.to_thread.run_sync(lambda: WriterActor.open(
                        path, model_id=self._model_id, dim=self._dim,
                        queue_size=self._config.queue_size,
                        batch_files=self._config.write_batch_files, on_event=self._on_event))
                except WriterBusyError:
                    raise ReadOnly(f"database {name!r} is read-only here: another PocketMCP "
                                   f"process holds the writer lock of {path}") from None
                db.pipeline = Pipeline(self._config, writer=actor, feed="none")
                self._tg.start_soon(self._run, db, name=f"pocketmcp.writer.{name}")
            return db.index, db.pipeline.requests

    async def _run(self, db: _Database) -> None:
        pipeline = db.pipeline
        assert pipeline is not None
        try:
            await pipeline.run()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pipeline.writer.close)
            db.pipeline = None
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

    async def release(self, name: str) -> None:
        """Stop writing database `name`: its writer commits what it has, closes and unlocks."""
        db = self._open.get(name)
        if db is not None and db.pipeline is not None:
            done = db.done
            db.pipeline.stop()
            await done.wait()

    async def shutdown(self) -> None:
        """Stop every writer, each after committing what it has."""
        self._stopping = True
        running = [(db.pipeline, db.done) for db in self._open.values()
                   if db.pipeline is not None]
        for pipeline, _ in running:
            pipeline.stop()
        for _, done in running:
            await done.wait()

    def close(self) -> None:
        for db in self._open.values():
            db.index.close()
            if db.pipeline is not None:
                db.pipeline.writer.close()
                db.pipeline = None
