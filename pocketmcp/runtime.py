"""Opens an index once, for every entry point: model, store, readers, writers, readiness.

`serve`, `index`, `watch`, `search`, `eval` and `import` all start here with a Plan saying
what they need. Start-up never blocks a front end: `open_runtime` hands back the `Runtime` at
once, and boot builds the services in order in the background (`Services`, complete when
made: the embedder, the chunker and every index host); requests wait a bounded time for them.
This is the one place that knows "still loading" and "read-only".

Every index this process writes has exactly one writer actor, hosted alike (hosts.py): the
main index's is fed by the watched folder (and by tools), a named database's by tools alone.
One process per file holds its writer lock; the others serve it read-only, and a process that
serves the main index read-only takes its lock over when the holder goes away.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from pocketmcp import logs
from pocketmcp.boot import Boot, Services
from pocketmcp.config import Config
from pocketmcp.convert.pool import Converter
from pocketmcp.embed import factory
from pocketmcp.embed.base import EmbedderSource
from pocketmcp.errors import (
    InvalidRequest,
    NotReady,
    PocketError,
    ProviderUnavailable,
    ReadOnly,
    WriterBusyError,
    single,
)
from pocketmcp.hosts import IndexHost
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.prepare import Preparer
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import EventHook
from pocketmcp.plans import Plan, Reading, Status, Writing
from pocketmcp.readiness import Readiness, serving_status
from pocketmcp.store.api import Place, ReadIndex
from pocketmcp.store.registry import check_name

# The status, health and progress answers are pydantic models (ops/results.py): imported when
# first asked for, so a stdio server's runtime starts booting before they load.
if TYPE_CHECKING:
    from pocketmcp.ops.index import Rescanner
    from pocketmcp.ops.status_results import HealthResult, IndexProgress, StatusResult

log = logs.get("pocketmcp.runtime")

WRITER_RETRY_S = 2.0  # how often a read-only process tries to take the writer lock


class Runtime:
    """The one face front ends (MCP tools, the web page, commands) use: what a request needs,
    once start-up has made it; start-up's state; and the life cycle."""

    def __init__(self, config: Config, plan: Plan, *, on_event: EventHook | None = None,
                 hold: anyio.Event | None = None, embedding: EmbedderSource | None = None,
                 place: Place | None = None) -> None:
        self.config = config
        self.plan = plan
        # Set by a front end once it is up: until then the main index's writer (indexing, the
        # vector file's check) waits, so it does not compete with the front end's start.
        self._hold = hold
        self._on_event = on_event
        self._embedding = embedding or factory.Embedding(config.embed)
        self.place = place or config.main_place()
        self.readiness = Readiness()
        # Searches in flight, which this process's indexing gives way to.
        self.precedence = Precedence()
        self.converter = Converter(config.convert.kept_in(self.place.beside("ocr")))
        self.pipeline_settings = config.pipeline
        self.ingest_settings = config.ingest
        self.fed = anyio.Event()  # the main index's feed has returned (or never started)
        self.fed_seconds = 0.0  # how long it ran
        self._booted: Services | None = None  # set once, with `readiness.ready`
        self._tg: anyio.abc.TaskGroup | None = None
        self._stopped = anyio.Event()

    # -- start-up's state ---------------------------------------------------------------------

    @property
    def status(self) -> Status:
        return self.readiness.status

    @property
    def ready(self) -> anyio.Event:
        return self.readiness.ready

    @property
    def scanned(self) -> Stats | None:
        return self.readiness.scanned

    async def started(self) -> None:
        """Wait until ready for as long as it takes; raise if start-up failed."""
        await self.readiness.started()

    @property
    def services(self) -> Services:
        """What boot made; NotReady before it is done (see `started`)."""
        if self._booted is None:
            raise NotReady("the index is not open yet")
        return self._booted

    @property
    def pipeline(self) -> Pipeline | None:
        """The main index's writer, while this process holds its lock."""
        return self._booted.main.pipeline if self._booted is not None else None

    @property
    def feed(self) -> Pipeline | None:
        """The main index's writer and feed, running or (once the runtime is closed) done:
        its counts."""
        return self._booted.main.latest if self._booted is not None else None

    @property
    def watching(self) -> bool:
        """Whether this process indexes the watched folder (its files are then documents of
        the main index already)."""
        pipeline = self.pipeline
        return pipeline is not None and pipeline.feed != "none"

    @property
    def scans(self) -> bool:
        """Whether readiness waits for a first scan of the watched folder: this process's
        own, or (read-only) that of the writer holding the lock, as the index records it."""
        return self.watching or self.status.role == "reader"

    def opened(self) -> ReadIndex | None:
        """The main index once it is open for reading, without waiting."""
        return self._booted.main.index if self._booted is not None else None

    # -- life cycle ---------------------------------------------------------------------------

    async def run(self, tg: anyio.abc.TaskGroup) -> None:
        """Open, load and (with a feed) index until `shutdown()`; named databases' writers
        run in `tg`."""
        self._tg = tg
        try:
            try:
                services = await self._start()
                if self._hold is not None:
                    await self._hold.wait()
                if self.status.role == "reader":
                    tg.start_soon(self.readiness.follow_writer_scan, services.main.index,
                                  name="pocketmcp.scan_follower")
                await self._serve_main(services)
            except BaseExceptionGroup as group:  # an actor's failure, from inside its group
                raise single(group) from None
        except PocketError as exc:
            self.readiness.fail(str(exc))
            log.error("failed", error=str(exc))
            if not self.plan.keep_serving:
                raise
        finally:
            self.fed.set()
            with anyio.CancelScope(shield=True):
                await self.converter.aclose()
            self._stopped.set()

    async def _start(self) -> Services:
        config = self.config
        services = await Boot(self.plan, self.place, self._embedding, self.readiness,
                              self.converter, self.pipeline_settings, self._on_event,
                              chunk_size=config.pipeline.chunk_size,
                              chunk_overlap=config.pipeline.chunk_overlap,
                              write_batch_files=config.pipeline.write_batch_files,
                              precedence=self.precedence).services()
        self._booted = services
        self.ready.set()
        self.status.phase = "indexing" if self.watching else "ready"
        index = services.main.index
        (log.info if self.plan.keep_serving else log.debug)(
            "ready", role=self.status.role, embedding=services.identity.describe(),
            index=index.where, index_open_s=self.status.index_open_s,
            model_load_s=self.status.model_load_s, vectors=index.vectors_from,
            seconds=round(time.time() - self.status.started_at, 3))
        return services

    async def _serve_main(self, services: Services) -> None:
        """Run the main index's writer while this holds its lock; else wait to take it."""
        main, stopping = services.main, self.readiness.stopping
        while not stopping.is_set():
            if main.pipeline is not None:
                await self._run_main(main)
                return
            if self.plan.writer != "try":
                await stopping.wait()
                return
            with anyio.move_on_after(WRITER_RETRY_S):
                await stopping.wait()
            if stopping.is_set():
                return
            try:
                writer = await anyio.to_thread.run_sync(main.open_writer)
            except WriterBusyError:
                continue
            main.adopt(writer)
            self.status.role = "writer"
            log.info("writer_lock_acquired", index=self.place.describe())
        main.discard()  # stopped before its writer ran (nothing when it has none)

    async def _run_main(self, main: IndexHost) -> None:
        pipeline = main.pipeline
        assert pipeline is not None
        # The model loads before the first batch that needs it (pipeline/embedder.py): a
        # scan that finds nothing to embed never loads it.
        if self.readiness.stopping.is_set():  # stopped meanwhile: the feed is not started
            main.discard()
            return
        started = time.perf_counter()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.readiness.mark_indexed, pipeline, started,
                              name="pocketmcp.indexed")
                await main.run(raise_failure=True)
                tg.cancel_scope.cancel()
            if pipeline.feed == "scan" and pipeline.scan_done.is_set():
                self.readiness.log_indexed(pipeline, started)
        finally:
            self.fed_seconds = time.perf_counter() - started
            self.fed.set()

    def stop(self) -> None:
        """Stop the feed (or its start) and take no new writes; what is in flight is still
        committed. `shutdown` waits for that."""
        self.readiness.stopping.set()
        if self._hold is not None:
            self._hold.set()
        if self._booted is not None:
            self._booted.hosts.stop()

    async def shutdown(self) -> None:
        """`stop`, then wait until work in flight is committed."""
        self.stop()
        if self._booted is not None:
            await self._booted.hosts.wait_stopped()
        await self._stopped.wait()

    async def aclose(self) -> None:
        """Release everything: the embedder's connections, writers (checkpoint, unlock) and
        read-only connections."""
        if self._booted is not None:
            with anyio.CancelScope(shield=True):
                await self._booted.embedder.aclose()
            self._booted.hosts.close()

    # -- what a request needs, once it is there -----------------------------------------------

    async def _services(self, db_name: str | None = None) -> Services:
        if db_name is not None:  # a bad name fails before any wait
            check_name(db_name)
        await self.readiness.wait_ready()
        return self.services

    async def read_index(self, db_name: str | None = None) -> ReadIndex:
        """The main index (or database `db_name`) for listing and reading."""
        services = await self._services(db_name)
        return (await services.hosts.get(db_name)).index

    async def reading(self, db_name: str | None = None) -> Reading:
        """The main index (or database `db_name`) for searching. While the model is still
        loading at start, the main index is searched by keywords: at once when a scan of
        the folder was completed before (an earlier run's), else after the wait for
        start-up; a request before the index is open waits for that first."""
        if db_name is None:
            await self.readiness.wait_searchable()
            if await self.readiness.scanned_before():
                return self.readiness.early_reading(self.config.serve.search_timeout_s, True,
                                                     self.precedence)
        try:
            services = await self._services(db_name)
        except NotReady:
            if db_name is not None or self.readiness.early is None or (
                    self.status.phase == "failed"):
                raise
            return self.readiness.early_reading(self.config.serve.search_timeout_s,
                                                self.status.initial_indexing_done,
                                                self.precedence)
        host = await services.hosts.get(db_name)
        complete = await self.readiness.scan_settled(host.pipeline) if (
            db_name is None) else True
        return Reading(host.index, services.embedder, complete, self.precedence,
                       deadline_s=self.config.serve.search_timeout_s)

    async def writing(self, db_name: str | None = None) -> Writing:
        """The main index (or database `db_name`) for writing: READ_ONLY while another
        process holds its writer lock."""
        services = await self._services(db_name)
        if db_name is None and not self.plan.requests:
            raise ReadOnly("this process takes no writes: it indexes the folder alone; send "
                           "writes to a server of the index")
        host = await services.hosts.get(db_name)
        assert self._tg is not None
        writes = await host.writes(self._tg)
        fed = host.pipeline is not None and host.pipeline.feed == "follow"
        return Writing(host.index, writes, Preparer(
            services.chunker, services.embedder, most=self.config.pipeline.max_chunks_per_doc,
            defer=fed))  # a provider that is down: its embedder takes the vectors later

    async def create_database(self, name: str) -> tuple[str, bool]:
        """Make sure database `name` exists; (its file or Postgres schema, whether this
        call created it)."""
        services = await self._services(name)
        assert self._tg is not None
        return await services.hosts.create(name, self._tg)

    async def rescanner(self) -> Rescanner:
        """The main index's running feed, to scan the watched folder again."""
        services = await self._services()
        pipeline = services.main.pipeline
        if pipeline is None and self.status.role == "reader":
            raise ReadOnly("this server is read-only: the process holding the writer lock "
                           f"of {self.place.describe()} indexes the folder")
        if pipeline is None or pipeline.feed == "none":
            raise InvalidRequest("no folder is watched: start the server with WATCH_DIR (or "
                                 "--data-folder) set to reindex it")
        usage = services.embedder.usage
        left = usage.retry_in()
        if left is not None:
            raise ProviderUnavailable(
                f"the embedding provider is failing ({usage.last_error}); the folder is "
                f"indexed as soon as it answers again (next try in {left:.0f} s)")
        return pipeline

    async def status_report(self) -> StatusResult:
        """The status tool's answer: what this process serves and how far indexing is."""
        from pocketmcp.ops import index as index_ops  # pydantic's models, see above

        booted = self._booted
        config = self.config.embed
        return await index_ops.status(
            self.status, model=booted.identity.model if booted else index_ops.model_named(
                config.provider, config.model),
            embedder=booted.embedder if booted else None, index_path=self.place.describe(),
            watch_dir=str(self.config.watched.root.resolve()) if self.watching else None,
            pipeline=self.pipeline, index=self.opened(), ocr=self.converter.ocr_status(),
            serving=serving_status(self.readiness, booted.embedder if booted else None))

    def progress(self) -> IndexProgress:
        """How far the watched folder's feed has come (blocking: it sizes the index)."""
        from pocketmcp.ops import index as index_ops  # pydantic's models, see above

        return index_ops.progress(self.pipeline, self.place.size())

    def health(self) -> HealthResult:
        from pocketmcp.ops import index as index_ops  # pydantic's models, see above

        return index_ops.health(self.status, opened=self.opened() is not None,
                                watching=self.scans)


async def on_signals(stop: Callable[[str], None]) -> None:
    """Call `stop` with the signal's name for each SIGTERM or SIGINT: how every entry point
    that runs a runtime (a server, `index`, `watch`) hears that it is to stop."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            stop(signal.Signals(signum).name)


@asynccontextmanager
async def open_runtime(config: Config, plan: Plan, *, on_event: EventHook | None = None,
                       drain_s: float | None = None, hold: anyio.Event | None = None,
                       embedding: EmbedderSource | None = None,
                       place: Place | None = None) -> AsyncIterator[Runtime]:
    """A runtime started in the background. On leaving, work in flight is committed (within
    `drain_s` seconds when given; what is left then is cancelled, and every started
    transaction still commits or rolls back whole) and everything is released. With `hold`,
    the main index's writer starts once it is set. `embedding` gives the embedder (the
    settings' provider by default), `place` the main index (the settings' by default). A
    failure of its own tasks is raised as itself, not as a group."""
    runtime = Runtime(config, plan, on_event=on_event, hold=hold, embedding=embedding,
                      place=place)
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
        await runtime.aclose()
