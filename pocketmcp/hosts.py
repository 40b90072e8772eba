"""The indexes one process serves, each hosted alike: the main index and every named database.

An `IndexHost` holds one index: its read side, open from the start, and its writer while this
process holds the index's writer lock. The writer is a pipeline (pipeline/supervisor.py): fed
by the watched folder for the main index when the plan asks, by tool requests alone
otherwise. The same rules hold for every index:

- A process takes an index's writer lock when it needs it: at start for the main index when
  the plan asks (`index`, `watch`, `serve`), on the first write for a named database. While
  another process holds it, the index is read here and its writes are READ_ONLY (Postgres
  takes every process's writes).
- A writer that fails (an infrastructure error of its index: disk full, the database gone) is
  logged with the index named and released with its lock; the other indexes go on, and the
  next write starts a new writer. The main index's failure also goes to the runtime's status,
  and a process that exists to index (`index`, `watch`) raises it.
- On the way out, writers take no new work, commit what they have and release their locks.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc

from pocketmcp import logs, private
from pocketmcp.core.identity import Identity
from pocketmcp.errors import (
    ModelMismatchError,
    PocketError,
    ReadOnly,
    Stopping,
    StoreError,
    WriterBusyError,
    single,
)
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import EventHook, WriterActor, WriterInbox
from pocketmcp.store.api import Place, ReadIndex
from pocketmcp.store.registry import Registry, not_found

log = logs.get("pocketmcp.hosts")

# Makes the pipeline that runs a host's writer (its feed, if any, comes with it).
Feeder = Callable[[WriterActor], Pipeline]


def open_writer(place: Place, identity: Identity, *, rebuild: bool = False, queue_size: int,
                batch_files: int, on_event: EventHook | None) -> WriterActor:
    """The writer actor of the index at `place`, made if missing (blocking: it migrates its
    schema and takes the writer lock). WriterBusyError while another process holds the lock;
    ModelMismatchError when the index was built with other embeddings. Files of the index
    that others may read are logged, once, with the command that narrows them."""
    writer = place.writer(identity, rebuild=rebuild)
    exposed = private.exposed(place.own_files())
    if exposed:
        log.warning("index_readable_by_others", index=place.describe(),
                    paths=[str(p) for p in exposed], fix=private.narrowing(exposed))
    return WriterActor(writer, queue_size=queue_size, batch_files=batch_files,
                       on_event=on_event)


class IndexHost:
    """One index this process serves: reads always, writes while it holds the writer lock."""

    def __init__(self, name: str | None, place: Place, index: ReadIndex, *,
                 identity: Identity, queue_size: int, batch_files: int,
                 on_event: EventHook | None, pipeline_for: Feeder,
                 on_demand: bool = True) -> None:
        self.name = name  # None: the main index
        # Whether a write starts the writer (a named database's); the main index's is
        # started by the runtime, as its plan says.
        self.on_demand = on_demand
        self.place = place
        self.index = index
        self.identity = identity
        self.pipeline: Pipeline | None = None  # the running writer, while this holds the lock
        self.latest: Pipeline | None = None  # the last writer adopted, running or done
        self._failed: str | None = None  # why the last writer failed, if it did
        self._queue_size = queue_size
        self._batch_files = batch_files
        self._on_event = on_event
        self._pipeline_for = pipeline_for
        self._opening = anyio.Lock()
        self._stopping = False
        self._done = anyio.Event()
        self._done.set()  # no writer runs

    @property
    def shown(self) -> str:
        return "the main index" if self.name is None else f"database {self.name!r}"

    def open_writer(self) -> WriterActor:
        """The index's writer actor, the index made if missing (blocking: it migrates and
        takes the lock). WriterBusyError while another process holds the lock."""
        return open_writer(self.place, self.identity, queue_size=self._queue_size,
                           batch_files=self._batch_files, on_event=self._on_event)

    def adopt(self, writer: WriterActor) -> Pipeline:
        """Make `writer` (opened by `open_writer`) this host's writer; `run` runs it."""
        self.pipeline = self.latest = self._pipeline_for(writer)
        self._done = anyio.Event()
        return self.pipeline

    async def run(self, *, raise_failure: bool = False) -> None:
        """Run the adopted writer until it is stopped; then release it (see the rules
        above for a failure)."""
        pipeline = self.pipeline
        assert pipeline is not None
        try:
            if self._stopping:
                pipeline.stop()
            try:
                await pipeline.run()
            except BaseExceptionGroup as group:  # an actor's failure, from inside its group
                raise single(group) from None
        except PocketError as exc:  # infrastructure of this index alone: the others go on
            self._failed = str(exc)
            log.error("writer_failed", index=self.place.describe(), error=str(exc))
            if raise_failure:
                raise
        finally:
            pipeline.requests.close()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(pipeline.writer.close_file)
            if self.pipeline is pipeline:
                self.pipeline = None
            self._done.set()

    def discard(self) -> None:
        """Release an adopted writer that is not to run (stopped before it started)."""
        pipeline, self.pipeline = self.pipeline, None
        if pipeline is not None:
            pipeline.writer.close()
        self._done.set()

    async def writes(self, tg: anyio.abc.TaskGroup) -> WriterInbox:
        """The way to this index's writer, started in `tg` now if need be (the index made
        if missing); READ_ONLY while another process holds its lock."""
        async with self._opening:
            if self._stopping:
                raise Stopping("the server is shutting down; nothing was written")
            if self.pipeline is not None and self.pipeline.writer.ended:
                await self._done.wait()  # a writer that failed is being released
            if self.pipeline is None and not self.on_demand and self._failed is not None:
                raise StoreError(f"the writer of {self.place.describe()} stopped: {self._failed}; "
                                 "restart the server once that is mended")
            if self.pipeline is None and not self.on_demand:
                raise ReadOnly(f"this server is read-only: another PocketMCP process holds the "
                               f"writer lock of {self.place.describe()}; send writes to that "
                               "process")
            if self.pipeline is None:
                try:
                    writer = await anyio.to_thread.run_sync(self.open_writer)
                except WriterBusyError:
                    raise ReadOnly(f"{self.shown} is read-only here: another PocketMCP process "
                                   f"holds the writer lock of {self.place.describe()}; send "
                                   "writes to that process") from None
                self.adopt(writer)
                tg.start_soon(self.run, name=f"pocketmcp.writer.{self.name or 'main'}")
            assert self.pipeline is not None
            return self.pipeline.requests

    def stop(self) -> None:
        """Take no new writes; the writer commits what it has and stops."""
        self._stopping = True
        if self.pipeline is not None:
            self.pipeline.stop()

    async def wait_stopped(self) -> None:
        await self._done.wait()

    def close(self) -> None:
        """Release the read side and, if a writer is still open, its lock."""
        self.index.close()
        if self.pipeline is not None:
            self.pipeline.writer.close()
            self.pipeline = None


class Hosts:
    """The main index's host and the named databases' hosts, made on first use."""

    def __init__(self, main: IndexHost, registry: Registry, *,
                 host_for: Callable[[str, Place], IndexHost]) -> None:
        self.main = main
        self.registry = registry
        self._host_for = host_for
        self._named: dict[str, IndexHost] = {}
        self._made: set[str] = set()  # databases known to exist, their model checked

    def all(self) -> list[IndexHost]:
        return [self.main, *self._named.values()]

    async def get(self, name: str | None, *, create: bool = False) -> IndexHost:
        """The host of the main index (None) or of database `name`, its model checked;
        NotFound for a database never created (unless `create`)."""
        if name is None:
            return self.main
        place = self.registry.where(name)
        host = self._named.get(name)
        if name not in self._made:
            made = await anyio.to_thread.run_sync(place.exists)
            if not made and not create:
                raise not_found(name)
            if host is None:
                host = self._named[name] = self._host_for(name, place)
            if made:
                stored = await host.index.run(lambda r: r.identity())
                if stored is not None and stored != host.identity:
                    raise ModelMismatchError(host.index.where, stored.describe(),
                                             stored.differences(host.identity))
                if stored is not None:
                    self._made.add(name)
        assert host is not None
        return host

    async def create(self, name: str, tg: anyio.abc.TaskGroup) -> tuple[str, bool]:
        """Make sure database `name` exists; (where it is, whether this call created it).
        While another process holds its lock, that process has made (or is making) it."""
        place = self.registry.where(name)
        existed = await anyio.to_thread.run_sync(place.exists)
        host = await self.get(name, create=True)
        try:
            await host.writes(tg)
        except ReadOnly:
            return place.describe(), False
        self._made.add(name)
        return place.describe(), not existed

    def stop(self) -> None:
        for host in self.all():
            host.stop()

    async def wait_stopped(self) -> None:
        for host in self.all():
            await host.wait_stopped()

    def close(self) -> None:
        for host in self.all():
            host.close()
