"""What the MCP front end serves: the index, the model and the live pipeline of one process.

Start-up never blocks the front end: the model loads and the pipeline runs in the background
while tools that need them wait (a bounded time) on `ready`. One process per index holds the
writer lock; the others serve read-only and take over the lock when it is released.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.errors import PocketError, WriterBusyError
from pocketmcp.store.queries import IndexReader
from pocketmcp.vectors import VectorIndex

T = TypeVar("T")
log = logs.get("pocketmcp.service")

READY_WAIT_S = 5.0
WRITER_RETRY_S = 2.0


class NotReady(PocketError):
    """The model or the index is still loading."""

    code = "NOT_READY"


class ReadOnly(PocketError):
    """This process does not hold the writer lock."""

    code = "READ_ONLY"


class ReaderPool:
    """Read-only connections handed out one caller at a time, run in worker threads."""

    def __init__(self, path: Path, size: int = 4) -> None:
        self._path = path
        self._free: list[IndexReader] = []
        self._slots = anyio.Semaphore(size)

    async def run(self, fn: Callable[[IndexReader], T]) -> T:
        async with self._slots:
            reader = self._free.pop() if self._free else await anyio.to_thread.run_sync(
                IndexReader, self._path)
            try:
                result = await anyio.to_thread.run_sync(fn, reader)
            except BaseException:
                reader.close()
                raise
            self._free.append(reader)
            return result

    def close(self) -> None:
        while self._free:
            self._free.pop().close()


class Status(msgspec.Struct, kw_only=True):
    phase: Literal["starting", "loading_model", "indexing", "ready", "failed"] = "starting"
    role: Literal["pending", "writer", "reader"] = "pending"
    model_ready: bool = False
    initial_indexing_done: bool = False
    last_error: str | None = None
    started_at: float = msgspec.field(default_factory=time.time)


class Service:
    def __init__(self, config: Config, *, watch: bool) -> None:
        from pocketmcp.databases import Databases
        from pocketmcp.engine import Engine
        from pocketmcp.pipeline.supervisor import Pipeline
        from pocketmcp.store.writes import IndexWriter

        self.config = config
        self.watch = watch
        self.status = Status()
        self.ready = anyio.Event()
        self.readers = ReaderPool(config.sqlite_path)
        self.databases = Databases(config.databases_dir)  # the named ones, beside this index
        self.engine: Engine | None = None
        self.writer: IndexWriter | None = None
        self.pipeline: Pipeline | None = None
        self.vectors = VectorIndex(384)  # replaced by one of the model's dimension
        self.write_limiter = anyio.CapacityLimiter(1)
        self.query_limiter = anyio.CapacityLimiter(2)
        self._stopping = anyio.Event()
        self._stopped = anyio.Event()

    # -- life cycle ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Load, index and watch until `shutdown()`; failures are recorded, never raised."""
        try:
            await self._run()
        except PocketError as exc:
            self._fail(exc)
        except Exception as exc:  # an actor's infrastructure failure: keep serving reads
            log.exception("pipeline_failed", error=repr(exc))
            self._fail(exc)
        finally:
            if self.engine is not None:
                with anyio.CancelScope(shield=True):
                    await self.engine.converter.aclose()
            self._stopped.set()

    def _fail(self, exc: BaseException) -> None:
        self.status.phase = "failed"
        self.status.last_error = str(exc)
        log.error("service_failed", error=str(exc))

    async def _run(self) -> None:
        from pocketmcp.engine import Engine, open_writer
        from pocketmcp.model import ModelSpec

        self.status.phase = "loading_model"
        spec = await anyio.to_thread.run_sync(ModelSpec, self.config)
        try:
            self.writer = await anyio.to_thread.run_sync(open_writer, self.config, spec)
            self.status.role = "writer"
        except WriterBusyError:
            self.status.role = "reader"
            log.info("read_only", index=str(self.config.sqlite_path),
                     reason="another process holds the writer lock")
        self.engine = await Engine.load(self.config, spec)
        self.vectors = VectorIndex(spec.dim)
        self.status.model_ready = True
        if self.writer is None:
            await self._wait_for_index(spec.model_id, spec.dim)
        await self.readers.run(self.vectors.sync)  # vectors into memory before the first search
        # The query session loads on first use: load it now, not in the first search.
        await anyio.to_thread.run_sync(self.engine.embedder.embed_query, "warm up",
                                       limiter=self.query_limiter)
        self.ready.set()
        self.status.phase = "indexing" if self.writer is not None and self.watch else "ready"
        log.info("ready", role=self.status.role, model=spec.model_id,
                 index=str(self.config.sqlite_path), seconds=round(
                     time.time() - self.status.started_at, 3))
        while not self._stopping.is_set():
            if self.writer is not None:
                if self.watch:
                    await self._run_pipeline()
                else:
                    await self._stopping.wait()
                return
            # Read-only: take over the writer lock when its holder goes away.
            with anyio.move_on_after(WRITER_RETRY_S):
                await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                self.writer = await anyio.to_thread.run_sync(open_writer, self.config, spec)
            except WriterBusyError:
                continue
            self.status.role = "writer"
            log.info("writer_lock_acquired", index=str(self.config.sqlite_path))

    async def _wait_for_index(self, model_id: str, dim: int) -> None:
        """A reader waits until the writer process has created the index."""
        from pocketmcp.errors import ModelMismatchError

        while not self.config.sqlite_path.exists():
            with anyio.move_on_after(0.2):
                await self._stopping.wait()
            if self._stopping.is_set():
                return
        stored = await self.readers.run(lambda r: r.model())
        if stored is not None and stored != (model_id, dim):
            raise ModelMismatchError(self.config.sqlite_path, stored[0], stored[1], model_id, dim)

    async def _run_pipeline(self) -> None:
        from pocketmcp.pipeline.supervisor import Pipeline

        assert self.engine is not None and self.writer is not None
        if not self.config.watch_dir.is_dir():
            raise PocketError(f"WATCH_DIR={self.config.watch_dir} is not a folder")
        events = logs.get("pocketmcp.index")

        def on_event(event: dict[str, Any]) -> None:
            kind = event.pop("event")
            events.info(kind, **event)

        self.pipeline = Pipeline(
            self.config, writer=self.writer, embed=self.engine.embedder.embed,
            dim=self.engine.spec.dim, chunker=self.engine.chunker, follow=True,
            on_event=on_event, embed_limiter=self.engine.model_limiter,
            write_limiter=self.write_limiter, converter=self.engine.converter,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._mark_indexed, self.pipeline, name="pocketmcp.indexed")
            if self._stopping.is_set():
                self.pipeline.stop()
            tg.start_soon(self._stop_pipeline_on_shutdown, self.pipeline,
                          name="pocketmcp.shutdown")
            await self.pipeline.run()
            tg.cancel_scope.cancel()

    async def _mark_indexed(self, pipeline: Any) -> None:
        await pipeline.scan_done.wait()
        self.status.initial_indexing_done = True
        if self.status.phase == "indexing":
            self.status.phase = "ready"
        s = pipeline.stats
        log.info("initial_indexing_done", added=s.added, updated=s.updated,
                 unchanged=s.unchanged, removed=s.removed, skipped=s.skipped)

    async def _stop_pipeline_on_shutdown(self, pipeline: Any) -> None:
        await self._stopping.wait()
        pipeline.stop()

    async def shutdown(self) -> None:
        """Stop watching and wait until work in flight is committed."""
        self._stopping.set()
        await self._stopped.wait()

    def close(self) -> None:
        self.readers.close()
        self.databases.close()
        if self.writer is not None:
            self.writer.close()

    # -- helpers for tools --------------------------------------------------------------------

    async def started(self) -> None:
        """Wait until ready for as long as it takes; raise if start-up failed."""
        while not self.ready.is_set():
            if self.status.phase == "failed":
                raise PocketError(self.status.last_error or "the index could not be opened")
            with anyio.move_on_after(0.1):
                await self.ready.wait()

    async def wait_ready(self) -> None:
        if self.ready.is_set():
            return
        if self.status.phase == "failed":
            raise NotReady(f"the index could not be opened: {self.status.last_error}")
        with anyio.move_on_after(READY_WAIT_S):
            await self.ready.wait()
        if not self.ready.is_set():
            detail = self.status.last_error or f"phase: {self.status.phase}"
            raise NotReady("index still loading (the model or the index is not ready yet, "
                           f"{detail}); try again in a few seconds")

    async def wait_indexed(self) -> bool:
        """Wait (bounded) for the initial scan of the watched folder; True when it is done."""
        await self.wait_ready()
        if self.status.initial_indexing_done or self.pipeline is None:
            return self.status.initial_indexing_done or self.pipeline is None
        with anyio.move_on_after(READY_WAIT_S):
            await self.pipeline.scan_done.wait()
        return self.status.initial_indexing_done or self.pipeline.scan_done.is_set()

    def require_writer(self) -> None:
        if self.writer is None:
            raise ReadOnly(
                f"this server is read-only: another PocketMCP process holds the writer lock of "
                f"{self.config.sqlite_path}; send writes to that process"
            )

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(writer, *args)` in a worker thread, serialised with the pipeline's writes."""
        self.require_writer()
        assert self.writer is not None
        writer = self.writer
        return await anyio.to_thread.run_sync(lambda: fn(writer, *args),
                                              limiter=self.write_limiter)
