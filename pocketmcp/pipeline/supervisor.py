"""One index file's writer actor and what feeds it, wired with bounded streams.

    watcher -> hasher -> chunker ---------------\\
                                                 >--> writer --> the index
    the index's waiting chunks -> embedder -----<
                          tool requests -------/

Two stages per document: the chunker's documents are written for keyword search at once
(their chunks wait for vectors), and the embedder takes the waiting chunks from the index,
most recently changed first, and sends their vectors to the writer. The feed is optional:
a named database has only tool requests. Closing the feed's source ends the stages in
order; one scan ends when every chunk has its vector (or, keywords first, when every file
is written for keywords), a watch when stopped; the writer commits its last batch and
returns once the feeds and the request inbox are all closed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp.convert.pool import Converter
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.base import Batching
from pocketmcp.errors import Busy, Stopping
from pocketmcp.messages import Chunked, Event, Hashed, ScanDone
from pocketmcp.pipeline.budget import CpuBudget
from pocketmcp.pipeline.chunker import GROUP_FILES, chunk_files
from pocketmcp.pipeline.embedder import Batcher, EmbedFn, LoadFn
from pocketmcp.pipeline.hasher import LOOK_FILES, Hasher, hash_files
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.settings import PipelineSettings, folder_record
from pocketmcp.pipeline.state import Backlog, InFlight, Stats, depth
from pocketmcp.pipeline.watcher import Folder, Only, path_filter, scan_folder, watch_folder
from pocketmcp.pipeline.writer import WriterActor
from pocketmcp.store.api import View, Waiting

Source = Callable[[MemoryObjectSendStream[Event]], Coroutine[Any, Any, None]]
Feed = Literal["none", "scan", "follow"]
# Watching, the embedder waits this long at most for the first scan's keywords before it
# starts: on two cores the model (which takes every core) would slow the scan that makes
# the folder findable, and the scan is a small part of the embedding's time. One scan
# (`index`) embeds from the start, as it always has: it returns when complete.
GIVE_WAY_S = 600.0


class Pipeline:
    """The writer of one index, fed by the folder (`scan` once, or `follow` it) or by tool
    requests alone (`none`). Tools reach the writer through `requests`."""

    def __init__(
        self, settings: PipelineSettings, *, writer: WriterActor, feed: Feed,
        embed: EmbedFn | None = None, dim: int = 0, chunker: Chunker | None = None,
        converter: Converter | None = None, force: bool = False,
        source: Source | None = None, accept_requests: bool = True,
        batching: Batching | None = None, wait_for_provider: bool = True,
        keywords_first: bool = False, give_way_s: float = GIVE_WAY_S,
        precedence: Precedence | None = None, load: LoadFn | None = None,
    ) -> None:
        if feed != "none" and (embed is None or chunker is None or converter is None):
            raise ValueError("a fed pipeline needs an embedder, a chunker and a converter")
        self.settings = settings
        self.writer = writer
        writer.keep_removed(settings.keep_removed_s, settings.keep_removed_most)
        self.feed = feed
        self.embed = embed
        self.load = load  # the model, before the first batch that needs it
        self.dim = dim
        self.chunker = chunker
        self.converter = converter
        self.force = force
        self.source = source
        self.accept_requests = accept_requests
        self.batching = batching or Batching(size=1, tokens=4096)  # the built-in model's
        self.wait_for_provider = wait_for_provider
        self.keywords_first = keywords_first  # one scan: vectors left to a later run
        self.give_way_s = give_way_s
        self.precedence = precedence or Precedence()  # the searches its stages give way to
        self.backlog = Backlog()
        self.stats = Stats()
        self.inflight = InFlight()
        self.scan_done = anyio.Event()
        if feed == "none":
            self.stats.scan_done = True
            self.scan_done.set()
        self._stop = anyio.Event()
        self.requests = writer.requests
        self._sends: dict[str, MemoryObjectSendStream[Any]] = {}
        self._scans: dict[int, anyio.Event] = {}
        self._tokens = itertools.count(1)
        self._running = False
        self._folder: Folder | None = None
        self._view: View | None = None

    def stop(self) -> None:
        """Stop the feed and take no new requests; what is in flight drains and commits, then
        run() returns."""
        self._stop.set()
        self.backlog.wake()  # the embedder, if idle, sees the stop at once
        self.requests.close()
        self.writer.stop_repair()

    def queue_depths(self) -> dict[str, dict[str, int]]:
        out = {name: depth(stream) for name, stream in self._sends.items()}
        out["writer"] = self.writer.depth()
        return out

    def _scan_finished(self, marker: ScanDone) -> None:
        if marker.token == 0:
            self.stats.scan_done = True
            self.scan_done.set()
            # The embedder, if idle, sees it at once: a scan that wrote nothing wakes it no
            # other way, and one scan's run ends only when it looks again (IDLE_S later).
            self.backlog.wake()
        else:
            done = self._scans.pop(marker.token, None)
            if done is not None:
                done.set()

    async def rescan(self, *, force: bool = False, only: Only | None = None) -> Stats:
        """Scan the folder again inside the running pipeline; returns what it changed."""
        if not self._running or self._stop.is_set() or self._folder is None:
            raise Stopping("the indexing pipeline is not running")
        if self._scans:
            raise Busy("a reindex is already running; try again when it has finished")
        token = next(self._tokens)
        done = self._scans[token] = anyio.Event()
        before = msgspec.structs.replace(self.stats)
        assert self._view is not None
        try:
            outbox = self._sends["events"].clone()
        except anyio.ClosedResourceError:
            self._scans.pop(token, None)
            raise Stopping("the indexing pipeline is shutting down") from None
        try:
            await scan_folder(outbox, folder=self._folder, view=self._view, stats=self.stats,
                              stop=self._stop, force=force, only=only, token=token)
            await done.wait()
        finally:
            self._scans.pop(token, None)
        changed = Stats()
        for field in Stats.__struct_fields__:
            now, then = getattr(self.stats, field), getattr(before, field)
            if isinstance(now, int | float) and not isinstance(now, bool):
                setattr(changed, field, now - then)
        return changed

    async def run(self) -> Stats:
        self._running = True
        try:
            # Read-only processes on this index report its first scan as this one does.
            await self.writer.record_scan("done" if self.feed == "none" else "running")
            if self.feed != "none" and self.source is None:  # readers resolve paths by it
                await self.writer.record_folder(folder_record(self.settings.watched))
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write, name="pocketmcp.writer")
                if self.feed != "none":
                    self._start_feed(tg)
                if not self.accept_requests:
                    self.requests.close()
            if self._view is not None:  # what is left for a later run (keywords first)
                self.stats.chunks_waiting = await self._view.run(_waiting_count)
        finally:
            self._running = False
            for done in self._scans.values():
                done.set()
            if self._view is not None:
                self._view.close()
        return self.stats

    def _start_feed(self, tg: anyio.abc.TaskGroup) -> None:
        assert self.embed is not None and self.chunker is not None
        assert self.converter is not None
        size = self.settings.queue_size
        events_tx, events_rx = anyio.create_memory_object_stream[Event](size)
        hashed_tx, hashed_rx = anyio.create_memory_object_stream[Hashed](size)
        self._sends.update({"events": events_tx, "hashed": hashed_tx})
        view = self._view = self.writer.view()
        watched = self.settings.watched
        folder = self._folder = Folder(watched.root, path_filter(watched))
        hasher = Hasher(root=folder.real, view=view, inflight=self.inflight, stats=self.stats,
                        max_bytes=self.settings.max_file_bytes, converter=self.converter,
                        library_of=watched.library_of, force=self.force,
                        # Groups no larger than the queues: files in flight stay bounded by
                        # them.
                        group=min(LOOK_FILES, size), precedence=self.precedence)
        if not (self.feed == "scan" and self.keywords_first):
            batcher = Batcher(embed=self._embed, dim=self.dim, view=view, stats=self.stats,
                              batching=self.batching, backlog=self.backlog,
                              scan_done=self.scan_done, finish=self.feed == "scan",
                              stop=self._stop if self.wait_for_provider else None,
                              halt=self._stop,
                              give_way_s=self.give_way_s if self.feed == "follow" else 0.0,
                              budget=CpuBudget(self.settings.cpu_budget) if (
                                  self.settings.cpu_budget) else None,
                              precedence=self.precedence, load=self.load)
            tg.start_soon(batcher.run, self.writer.feed(), name="pocketmcp.embedder")
        tg.start_soon(self._chunk, hashed_rx, self.writer.feed(), name="pocketmcp.chunker")
        tg.start_soon(self._hash, events_rx, hashed_tx, hasher, name="pocketmcp.hasher")
        if self.source is not None:
            tg.start_soon(self.source, events_tx, name="pocketmcp.watcher")
        elif self.feed == "follow":
            tg.start_soon(self._watch, events_tx, folder, view, name="pocketmcp.watcher")
        else:
            tg.start_soon(self._scan, events_tx, folder, view, name="pocketmcp.watcher")

    async def _embed(self, texts: list[str]) -> Any:
        assert self.embed is not None
        return await self.embed(texts)  # looked up per call: tests may swap the model

    async def _write(self) -> None:
        await self.writer.run(inflight=self.inflight, stats=self.stats,
                              on_scan_done=self._scan_finished, backlog=self.backlog,
                              precedence=self.precedence)

    async def _watch(self, outbox: MemoryObjectSendStream[Event], folder: Folder,
                     view: View) -> None:
        await watch_folder(outbox, folder=folder, view=view, stats=self.stats, stop=self._stop,
                           debounce_ms=self.settings.debounce_ms)

    async def _scan(self, outbox: MemoryObjectSendStream[Event], folder: Folder,
                    view: View) -> None:
        await scan_folder(outbox, folder=folder, view=view, stats=self.stats, stop=self._stop)

    async def _hash(self, inbox: MemoryObjectReceiveStream[Event],
                    outbox: MemoryObjectSendStream[Hashed], hasher: Hasher) -> None:
        await hash_files(inbox, outbox, hasher=hasher, concurrency=self.settings.read_concurrency)

    async def _chunk(self, inbox: MemoryObjectReceiveStream[Hashed],
                     outbox: MemoryObjectSendStream[Chunked]) -> None:
        assert self.chunker is not None
        await chunk_files(inbox, outbox, chunker=self.chunker, inflight=self.inflight,
                          stats=self.stats, most=self.settings.max_chunks_per_doc,
                          stop=self._stop,
                          # Groups no larger than the queues: files in flight stay bounded
                          # by them.
                          group=min(GROUP_FILES, self.settings.queue_size),
                          precedence=self.precedence)


def _waiting_count(reader: Waiting) -> int:
    return reader.waiting_count()
