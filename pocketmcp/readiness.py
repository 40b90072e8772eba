"""When a runtime is ready, and what callers wait for: the model and the index open, the
first scan of the watched folder done (this process's own, or, read-only, that of the writer
holding the lock, as the index records it). A part the runtime holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.core.identity import Identity
from pocketmcp.embed.keeper import StillLoading
from pocketmcp.errors import NotReady, PocketError, StoreError
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.plans import Reading, Status
from pocketmcp.store.api import Overview, ReadIndex

if TYPE_CHECKING:
    from pocketmcp.ops.status_results import ServingStatus

log = logs.get("pocketmcp.runtime")

READY_WAIT_S = 5.0  # how long a request waits for start-up before NOT_READY
SCAN_POLL_S = 0.25  # how often a read-only process looks whether the writer's scan is done


class Readiness:
    """Where start-up stands (`status`), and the waits a request makes for it."""

    def __init__(self) -> None:
        self.status = Status()
        self.ready = anyio.Event()  # the model and the index are there
        self.stopping = anyio.Event()
        self.scanned: Stats | None = None  # the feed's counts when its first scan ended
        # How this process serves: "shared" (an HTTP server, for every client of the index)
        # or "alone" (stdio, for the one client that started it; a command); and, shared,
        # how many clients are attached (mcp/sharing.py).
        self.serving = "alone"
        self.clients: Callable[[], int] | None = None
        # The main index once it is open, before the model is: searches meanwhile answer
        # by keywords from it at once (runtime.py).
        self.early: tuple[ReadIndex, Identity] | None = None
        self.opened = anyio.Event()  # set with `early`
        self._scanned = False  # `scanned_before` found it so (it stays so while loading)

    def searchable(self, index: ReadIndex, identity: Identity) -> None:
        self.early = (index, identity)
        self.opened.set()

    async def wait_searchable(self) -> None:
        """Wait a bounded time (READY_WAIT_S) until the index is open or start-up is done,
        whichever comes first; the caller then looks which (`early`, `ready`)."""
        if self.ready.is_set() or self.early is not None or self.status.phase == "failed":
            return
        with anyio.move_on_after(READY_WAIT_S):
            async with anyio.create_task_group() as tg:
                async def first(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(first, self.ready)
                tg.start_soon(first, self.opened)

    async def scanned_before(self) -> bool:
        """Whether the model still loads while the index, open, records a completed scan
        of the folder (an earlier run's) and documents: searches need not wait for this
        run's."""
        if self.early is None or self.ready.is_set() or self.status.phase == "failed":
            return False
        if self._scanned:  # read once: nothing in this process writes before it is ready
            return True

        def scanned(reader: Overview) -> bool:  # (a new index records no scan: "done")
            return reader.scan_done() and reader.counts()["documents"] > 0

        try:
            self._scanned = await self.early[0].run(scanned)
        except StoreError:
            return False
        return self._scanned

    def early_reading(self, deadline_s: float | None, complete: bool,
                      precedence: Precedence) -> Reading:
        """The main index, searched by keywords while the model loads."""
        assert self.early is not None
        index, identity = self.early
        return Reading(index, StillLoading(identity), complete, precedence,
                       deadline_s=deadline_s)

    def fail(self, error: str) -> None:
        self.status.phase = "failed"
        self.status.last_error = error

    async def started(self) -> None:
        """Wait until ready for as long as it takes; raise if start-up failed."""
        while not self.ready.is_set():
            if self.status.phase == "failed":
                raise PocketError(self.status.last_error or "the index could not be opened")
            with anyio.move_on_after(0.1):
                await self.ready.wait()

    async def wait_ready(self) -> None:
        """Wait a bounded time for start-up; NOT_READY when it is not done by then."""
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

    async def scan_settled(self, pipeline: Pipeline | None) -> bool:
        """Wait (bounded) for the first scan of the watched folder; True when it is done or
        there is none to wait for."""
        if self.status.initial_indexing_done or pipeline is None:
            return True
        with anyio.move_on_after(READY_WAIT_S):
            await pipeline.scan_done.wait()
        return pipeline.scan_done.is_set()

    async def mark_indexed(self, pipeline: Pipeline, started: float) -> None:
        """Once `pipeline`'s first scan is done: ready, with its counts logged (a followed
        folder's; one scan's are logged when it ends, `log_indexed`)."""
        await pipeline.scan_done.wait()
        self.status.initial_indexing_done = True
        if self.status.phase == "indexing":
            self.status.phase = "ready"
        if pipeline.feed == "follow":
            self.log_indexed(pipeline, started)

    def log_indexed(self, pipeline: Pipeline, started: float) -> None:
        """Log the first scan's counts (Stats.counts: as `index`'s summary gives them). One
        scan's once its run has ended, so they are its final counts, vectors included."""
        s = self.scanned = msgspec.structs.replace(pipeline.stats)
        log.info("initial_indexing_done", files=s.seen, **s.counts(),
                 seconds=round(time.perf_counter() - started, 3))

    async def follow_writer_scan(self, index: ReadIndex) -> None:
        """In a read-only process: the first scan is done when the index's writer records
        it (or when this process takes the writer lock over and finishes its own)."""
        while not self.stopping.is_set() and self.status.role == "reader":
            try:
                done = await index.run(lambda reader: reader.scan_done())
            except StoreError as exc:  # the writer is replacing the file: next time
                log.debug("scan_state_unreadable", error=str(exc))
                done = False
            if done:
                self.status.initial_indexing_done = True
                if self.status.phase == "indexing":
                    self.status.phase = "ready"
                return
            if self.status.phase == "ready":
                self.status.phase = "indexing"
            with anyio.move_on_after(SCAN_POLL_S):
                await self.stopping.wait()


def serving_status(readiness: Readiness, embedder: object | None) -> ServingStatus:
    """How this process serves, its clients, the model's state and the memory it holds."""
    from pocketmcp.embed.keeper import rss_mib
    from pocketmcp.ops.status_results import ServingStatus  # pydantic's models: when asked for

    # The built-in model has a state (embed/keeper.py); a remote provider's client has none.
    state = getattr(embedder, "model_state", None)
    clients = readiness.clients
    return ServingStatus(
        serving=readiness.serving, clients=clients() if clients is not None else None,
        model_state=state.state if state is not None else None,
        model_unloads=state.unloads if state is not None else 0,
        model_reload_s=state.load_s if state is not None else None, memory_mib=rss_mib())
