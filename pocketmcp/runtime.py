"""Opens an index once, for every entry point: model, store, readers, writer, readiness.

`serve`, `index`, `watch`, `search` and `eval` all start here with a Plan saying what they
need. Start-up never blocks a front end: the model loads and the index opens in the background
while callers wait, a bounded time, for what they ask for. This is the one place that knows
"still loading" and "read-only".

Every index file this process writes has exactly one writer actor: the main index's is fed by
the watched folder (and by tools), a named database's by tools alone. One process per file
holds its writer lock; the others serve it read-only, and a process that serves the main index
read-only takes its lock over when the holder goes away.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.convert.pool import Converter
from pocketmcp.core.chunking import Chunker
from pocketmcp.core.identity import Identity
from pocketmcp.databases import Databases
from pocketmcp.embed import factory
from pocketmcp.embed.background import model_background
from pocketmcp.embed.base import Embedder, EmbedderSource
from pocketmcp.errors import (
    InvalidRequest,
    ModelMismatchError,
    PocketError,
    ProviderError,
    ProviderUnavailable,
    ReadOnly,
    WriterBusyError,
    single,
)
from pocketmcp.pipeline.prepare import Preparer
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import EventHook, WriterActor
from pocketmcp.plans import Plan, Reading, Status, Writing
from pocketmcp.readiness import Readiness
from pocketmcp.store import places
from pocketmcp.store.api import ReadIndex
from pocketmcp.store.registry import Registry

log = logs.get("pocketmcp.runtime")

WRITER_RETRY_S = 2.0  # how often a read-only process tries to take the writer lock


class Runtime(Readiness):
    def __init__(self, config: Config, plan: Plan, *, on_event: EventHook | None = None,
                 hold: anyio.Event | None = None, embedding: EmbedderSource | None = None
                 ) -> None:
        self.config = config
        self.embedding = embedding or factory.Embedding(config.embed_settings())
        # Set by a front end once it is up: until then the main index's writer (indexing, the
        # vector file's check) waits, so it does not compete with the front end's start.
        self.hold = hold
        self.plan = plan
        self.on_event = on_event
        self.status = Status()
        self.ready = anyio.Event()
        self.fed = anyio.Event()  # the main index's pipeline has returned (or never started)
        self.fed_seconds = 0.0  # how long it ran
        self.scanned: Stats | None = None  # the pipeline's counts when its first scan ended
        self.registry = Registry(places.main_index(config), config.databases_dir)
        self.converter = Converter(config.convert_limits())
        self.pipeline_settings = config.pipeline_settings()
        self.ingest_settings = config.ingest_settings()
        self.identity: Identity | None = None  # provider, model, dimension, prefixes
        self.embedder: Embedder | None = None
        self.chunker: Chunker | None = None
        self.main: ReadIndex | None = None
        self.pipeline: Pipeline | None = None  # the main index's writer, when this holds it
        self.databases: Databases | None = None
        self._stopping = anyio.Event()
        self._stopped = anyio.Event()

    # -- life cycle ---------------------------------------------------------------------------

    async def run(self, tg: anyio.abc.TaskGroup) -> None:
        """Open, load and (with a feed) index until `shutdown()`; named databases' writers
        run in `tg`."""
        try:
            try:
                await self._boot(tg)
                if self.hold is not None:
                    await self.hold.wait()
                if self.status.role == "reader":
                    tg.start_soon(self._follow_writer_scan, name="pocketmcp.scan_follower")
                await self._serve_main()
            except BaseExceptionGroup as group:  # an actor's failure, from inside its group
                raise single(group) from None
        except PocketError as exc:
            self.status.phase = "failed"
            self.status.last_error = str(exc)
            log.error("failed", error=str(exc))
            if not self.plan.keep_serving:
                raise
        finally:
            self.fed.set()
            with anyio.CancelScope(shield=True):
                await self.converter.aclose()
            self._stopped.set()

    async def _boot(self, tg: anyio.abc.TaskGroup) -> None:
        self.status.phase = "loading_model"
        identity = self.identity = await self._identity_for()
        self.main = places.read_index(places.main_index(self.config), identity.dim,
                                      root=self.config.watch_dir.absolute())
        opened: list[WriterActor] = []  # filled in its thread: a cancelled wait loses nothing
        try:
            async with anyio.create_task_group() as boot:  # the model loads meanwhile
                boot.start_soon(self._load_model, identity, name="pocketmcp.model")
                await self._open_index(identity, opened)
        except BaseException:
            for writer in opened:
                writer.close()  # its lock goes with the failed start
            raise
        assert self.embedder is not None
        self.databases = Databases(self.config, self.registry, identity=identity, tg=tg,
                                   on_event=self.on_event)
        if self.plan.search and not self._stopping.is_set():
            try:  # the query session loads on first use; the probes then teach it the
                # model's background, which every search reads its cosines against
                await model_background(self.embedder)
            except ProviderError as exc:  # searches answer by keywords until it is back
                log.warning("provider_unavailable", error=str(exc))
        if opened:
            self.pipeline = self._pipeline_for(opened[0])  # before `ready`: writes can queue
        self.ready.set()
        self.status.phase = "indexing" if self.watching else "ready"
        (log.info if self.plan.keep_serving else log.debug)(
            "ready", role=self.status.role, embedding=identity.describe(),
            index=self.main.where, index_open_s=self.status.index_open_s,
            model_load_s=self.status.model_load_s, vectors=self.main.vectors_from,
            seconds=round(time.time() - self.status.started_at, 3))

    async def _load_model(self, identity: Identity) -> None:
        started = time.perf_counter()
        embedder = self.embedder = await anyio.to_thread.run_sync(self.embedding.make, identity)
        self.chunker = Chunker(embedder.tokenizer, size=self.config.chunk_size,
                               overlap=self.config.chunk_overlap,
                               max_tokens=embedder.max_tokens)
        self.status.model_ready = True
        self.status.model_load_s = round(time.perf_counter() - started, 3)

    async def _open_index(self, identity: Identity, opened: list[WriterActor]) -> None:
        """Take the writer lock if the plan asks, and map the vector file: milliseconds."""
        started = time.perf_counter()
        assert self.main is not None
        if self.plan.writer != "never":
            try:
                await anyio.to_thread.run_sync(lambda: opened.append(
                    self._open_main_writer(identity)))
            except WriterBusyError:
                if self.plan.writer == "must":
                    raise
                log.info("read_only", index=str(self.config.sqlite_path),
                         reason="another process holds the writer lock")
        self.status.role = "writer" if opened else "reader"
        if not opened:
            await self._wait_for_index(identity)
        if self.plan.search and not self._stopping.is_set():
            await self.main.open_vectors()
        self.status.index_open_s = round(time.perf_counter() - started, 3)

    async def _identity_for(self) -> Identity:
        """What the main index is (to be) built with: the settings, completed by what the
        index records (nothing when it is rebuilt)."""
        where, stored = places.main_index(self.config), None
        if not self.plan.rebuild:
            stored = await anyio.to_thread.run_sync(places.recorded_identity, where)
        return await self.embedding.identity(stored)

    def _open_main_writer(self, identity: Identity) -> WriterActor:
        where = places.main_index(self.config)
        return WriterActor.open(where, identity, rebuild=self.plan.rebuild,
                                queue_size=self.config.queue_size,
                                batch_files=self.config.write_batch_files,
                                on_event=self.on_event)

    async def _wait_for_index(self, identity: Identity) -> None:
        """A reader waits until some writer has made the index, then checks its embeddings."""
        assert self.main is not None
        stored = await self.main.made(self._stopping)
        if stored is not None and stored != identity:
            raise ModelMismatchError(self.main.where, stored.describe(),
                                     stored.differences(identity))

    def _pipeline_for(self, actor: WriterActor) -> Pipeline:
        """The main index's writer actor, fed as the plan says. Without the folder to feed
        it, it still takes tool requests; the missing folder is reported."""
        assert self.embedder is not None and self.identity is not None
        feed = self.plan.feed
        if feed != "none" and not self.config.watch_dir.is_dir():
            self.status.last_error = (f"WATCH_DIR={self.config.watch_dir} is not a folder; "
                                      "nothing is watched")
            log.error("not_watching", error=self.status.last_error)
            feed = "none"
        return Pipeline(
            self.pipeline_settings, writer=actor, feed=feed, embed=self.embedder.embed_documents,
            dim=self.identity.dim, chunker=self.chunker, converter=self.converter,
            force=self.plan.force, accept_requests=self.plan.requests,
            batching=self.embedder.batching,
            # Watching, a failing provider is waited for; one scan ends with its error.
            wait_for_provider=feed == "follow")

    async def _serve_main(self) -> None:
        """Run the main index's writer while this holds its lock; else wait to take it."""
        assert self.identity is not None
        while not self._stopping.is_set():
            if self.pipeline is not None:
                await self._run_main_pipeline(self.pipeline)
                return
            if self.plan.writer != "try":
                await self._stopping.wait()
                return
            with anyio.move_on_after(WRITER_RETRY_S):
                await self._stopping.wait()
            if self._stopping.is_set():
                return
            try:
                writer = await anyio.to_thread.run_sync(self._open_main_writer, self.identity)
            except WriterBusyError:
                continue
            self.pipeline = self._pipeline_for(writer)
            self.status.role = "writer"
            log.info("writer_lock_acquired", index=str(self.config.sqlite_path))

    async def _run_main_pipeline(self, pipeline: Pipeline) -> None:
        if self._stopping.is_set():
            pipeline.stop()
        elif pipeline.feed != "none" and self.embedder is not None:
            # Searches were answered without it; the folder's documents need it now.
            await self.embedder.load_documents()
            if self._stopping.is_set():  # stopped meanwhile: the feed is not started
                self.fed.set()
                return
        started = time.perf_counter()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._mark_indexed, pipeline, started, name="pocketmcp.indexed")
                await pipeline.run()
                tg.cancel_scope.cancel()
        finally:
            self.fed_seconds = time.perf_counter() - started
            self.fed.set()

    def stop(self) -> None:
        """Stop the feed (or its start) and take no new writes; what is in flight is still
        committed. `shutdown` waits for that."""
        self._stopping.set()
        if self.hold is not None:
            self.hold.set()
        if self.pipeline is not None:
            self.pipeline.stop()
        if self.databases is not None:
            self.databases.stop()

    async def shutdown(self) -> None:
        """`stop`, then wait until work in flight is committed."""
        self.stop()
        if self.databases is not None:
            await self.databases.wait_stopped()
        await self._stopped.wait()

    def close(self) -> None:
        """Release everything: writers (checkpoint, unlock) and read-only connections."""
        if self.databases is not None:
            self.databases.close()
        if self.main is not None:
            self.main.close()
        if self.pipeline is not None:
            self.pipeline.writer.close()

    # -- what a request needs, once it is there -----------------------------------------------

    async def read_index(self, db_name: str | None = None) -> ReadIndex:
        """The main index (or database `db_name`) for listing and reading."""
        if db_name is not None:
            self.registry.where(db_name)  # a bad name fails before any wait
        await self._wait_ready()
        if db_name is None:
            assert self.main is not None
            return self.main
        assert self.databases is not None
        return await self.databases.reading(db_name)

    async def reading(self, db_name: str | None = None) -> Reading:
        """The main index (or database `db_name`) for searching."""
        index = await self.read_index(db_name)
        assert self.embedder is not None
        complete = await self._scan_settled() if db_name is None else True
        return Reading(index, self.embedder, complete)

    async def writing(self, db_name: str | None = None) -> Writing:
        """The main index (or database `db_name`) for writing: READ_ONLY while another
        process holds its writer lock."""
        if db_name is not None:
            self.registry.where(db_name)
        await self._wait_ready()
        assert self.chunker is not None and self.embedder is not None
        prepare = Preparer(self.chunker, self.embedder, most=self.config.max_chunks_per_doc)
        if db_name is not None:
            assert self.databases is not None
            index, writes = await self.databases.writing(db_name)
            return Writing(index, writes, prepare)
        if self.pipeline is None or not self.plan.requests:
            raise ReadOnly(
                "this server is read-only: another PocketMCP process holds the writer lock "
                f"of {self.config.sqlite_path}; send writes to that process")
        assert self.main is not None
        return Writing(self.main, self.pipeline.requests, prepare)

    async def create_database(self, name: str) -> tuple[str, bool]:
        """Make sure database `name` exists; (its file or Postgres schema, whether this
        call created it)."""
        self.registry.where(name)  # a bad name fails before any wait
        await self._wait_ready()
        assert self.databases is not None
        return await self.databases.create(name)

    async def rescanner(self) -> Pipeline:
        """The main index's running pipeline, to scan the watched folder again."""
        await self._wait_ready()
        if self.pipeline is None and self.status.role == "reader":
            raise ReadOnly("this server is read-only: the process holding the writer lock "
                           f"of {self.config.sqlite_path} indexes the folder")
        if self.pipeline is None or self.pipeline.feed == "none":
            raise InvalidRequest("no folder is watched: start the server with WATCH_DIR (or "
                                 "--data-folder) set to reindex it")
        usage = self.embedder.usage if self.embedder is not None else None
        left = usage.retry_in() if usage is not None else None
        if usage is not None and left is not None:
            raise ProviderUnavailable(
                f"the embedding provider is failing ({usage.last_error}); the folder is "
                f"indexed as soon as it answers again (next try in {left:.0f} s)")
        return self.pipeline


@asynccontextmanager
async def open_runtime(config: Config, plan: Plan, *, on_event: EventHook | None = None,
                       drain_s: float | None = None, hold: anyio.Event | None = None,
                       embedding: EmbedderSource | None = None) -> AsyncIterator[Runtime]:
    """A runtime started in the background. On leaving, work in flight is committed (within
    `drain_s` seconds when given; what is left then is cancelled, and every started
    transaction still commits or rolls back whole) and everything is released. With `hold`,
    the main index's writer starts once it is set. `embedding` gives the embedder (the
    settings' provider by default). A failure of its own tasks is raised as
    itself, not as a group."""
    runtime = Runtime(config, plan, on_event=on_event, hold=hold, embedding=embedding)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.run, tg, name="pocketmcp.runtime")
            yield runtime
            with anyio.move_on_after(math.inf if drain_s is None else drain_s) as drain:
                await runtime.shutdown()
            if drain.cancelled_caught:
                log.warning("drain_timeout", seconds=drain_s)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single(group) from None
    finally:
        # The embedder outlives `run` (which returns after one scan): callers still search.
        if runtime.embedder is not None:
            with anyio.CancelScope(shield=True):
                await runtime.embedder.aclose()
        runtime.close()
