"""When a runtime is ready, and what callers wait for: the model and the index open, the
first scan of the watched folder done (this process's own, or, read-only, that of the writer
holding the lock, as the index records it). Part of `Runtime`, kept apart for its size."""

from __future__ import annotations

import time

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.errors import NotReady, PocketError, StoreError
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.plans import Status
from pocketmcp.store.api import ReadIndex

log = logs.get("pocketmcp.runtime")

READY_WAIT_S = 5.0  # how long a request waits for start-up before NOT_READY
SCAN_POLL_S = 0.25  # how often a read-only process looks whether the writer's scan is done


class Readiness:
    """The readiness half of `Runtime` (which sets these attributes)."""

    status: Status
    ready: anyio.Event
    scanned: Stats | None
    pipeline: Pipeline | None
    main: ReadIndex | None
    _stopping: anyio.Event

    async def _mark_indexed(self, pipeline: Pipeline, started: float) -> None:
        await pipeline.scan_done.wait()
        self.status.initial_indexing_done = True
        if self.status.phase == "indexing":
            self.status.phase = "ready"
        if pipeline.feed != "none":
            s = self.scanned = msgspec.structs.replace(pipeline.stats)
            log.info("initial_indexing_done", files=s.seen, added=s.added, updated=s.updated,
                     unchanged=s.unchanged, removed=s.removed, skipped=s.skipped,
                     chunks_embedded=s.chunks_embedded,
                     seconds=round(time.perf_counter() - started, 3))

    async def _follow_writer_scan(self) -> None:
        """In a read-only process: the first scan is done when the index's writer records
        it (or when this process takes the writer lock over and finishes its own)."""
        assert self.main is not None
        while not self._stopping.is_set() and self.status.role == "reader":
            try:
                done = await self.main.run(lambda reader: reader.scan_done())
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
                await self._stopping.wait()

    @property
    def watching(self) -> bool:
        """Whether this process indexes the watched folder (its files are then documents of
        the main index already)."""
        return self.pipeline is not None and self.pipeline.feed != "none"

    @property
    def scans(self) -> bool:
        """Whether readiness waits for a first scan of the watched folder: this process's
        own, or (read-only) that of the writer holding the lock, as the index records it."""
        return self.watching or self.status.role == "reader"

    def opened(self) -> ReadIndex | None:
        """The main index once it is open for reading, without waiting."""
        return self.main if self.ready.is_set() else None

    # -- waiting for start-up ---------------------------------------------------------------

    async def started(self) -> None:
        """Wait until ready for as long as it takes; raise if start-up failed."""
        while not self.ready.is_set():
            if self.status.phase == "failed":
                raise PocketError(self.status.last_error or "the index could not be opened")
            with anyio.move_on_after(0.1):
                await self.ready.wait()

    async def _wait_ready(self) -> None:
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

    async def _scan_settled(self) -> bool:
        """Wait (bounded) for the first scan of the watched folder; True when it is done or
        there is none to wait for."""
        pipeline = self.pipeline
        if self.status.initial_indexing_done or pipeline is None:
            return True
        with anyio.move_on_after(READY_WAIT_S):
            await pipeline.scan_done.wait()
        return pipeline.scan_done.is_set()
