"""Wires the actors together with bounded streams and runs them in one task group."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream

from pocketmcp.config import Config
from pocketmcp.convert import Converter, Limits
from pocketmcp.core.chunking import Chunker
from pocketmcp.core.paths import PathFilter
from pocketmcp.errors import PocketError
from pocketmcp.messages import Chunked, Embedded, Event, Hashed, ScanDone
from pocketmcp.pipeline.chunker import chunk_files
from pocketmcp.pipeline.embedder import Batcher, EmbedFn, embed_chunks
from pocketmcp.pipeline.hasher import Hasher, hash_files
from pocketmcp.pipeline.state import IndexView, InFlight, Stats
from pocketmcp.pipeline.watcher import Folder, Only, scan_folder, watch_folder
from pocketmcp.pipeline.writer import EventHook, write_index
from pocketmcp.store.writes import IndexWriter

Source = Callable[[MemoryObjectSendStream[Event]], Coroutine[Any, Any, None]]


class PipelineBusy(PocketError):
    """A rescan is already running."""

    code = "BUSY"


class PipelineStopped(PocketError):
    """The pipeline is not running (not started yet, or shutting down)."""


def read_gitignore(config: Config) -> list[str]:
    path = config.watch_dir / ".gitignore"
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


class Pipeline:
    """One run of watcher -> hasher -> chunker -> embedder batcher -> writer."""

    def __init__(
        self, config: Config, *, writer: IndexWriter, embed: EmbedFn, dim: int,
        chunker: Chunker, follow: bool, force: bool = False,
        on_event: EventHook | None = None, source: Source | None = None,
        embed_limiter: anyio.CapacityLimiter | None = None,
        write_limiter: anyio.CapacityLimiter | None = None,
        converter: Converter | None = None,
    ) -> None:
        self.config = config
        self.writer = writer
        self.embed = embed
        self.dim = dim
        self.chunker = chunker
        self.follow = follow
        self.force = force
        self.on_event = on_event
        self.source = source
        self.embed_limiter = embed_limiter or anyio.CapacityLimiter(1)
        self.write_limiter = write_limiter or anyio.CapacityLimiter(1)
        # A converter given by the caller is the caller's to close.
        self._own_converter = converter is None
        self.converter = converter or Converter(Limits.of(config))
        self.stats = Stats()
        self.inflight = InFlight()
        self.scan_done = anyio.Event()
        self._stop = anyio.Event()
        self._sends: dict[str, MemoryObjectSendStream[Any]] = {}
        self._scans: dict[int, anyio.Event] = {}
        self._tokens = itertools.count(1)
        self._running = False
        self._folder: Folder | None = None
        self._view: IndexView | None = None

    def stop(self) -> None:
        """Stop watching; what is in flight drains and commits, then run() returns."""
        self._stop.set()

    def queue_depths(self) -> dict[str, dict[str, int]]:
        out = {}
        for name, stream in self._sends.items():
            st = stream.statistics()
            out[name] = {"used": st.current_buffer_used, "max": int(st.max_buffer_size),
                         "waiting_senders": st.tasks_waiting_send}
        return out

    def _scan_finished(self, marker: ScanDone) -> None:
        if marker.token == 0:
            self.stats.scan_done = True
            self.scan_done.set()
        else:
            done = self._scans.pop(marker.token, None)
            if done is not None:
                done.set()

    async def rescan(self, *, force: bool = False, only: Only | None = None) -> Stats:
        """Scan the folder again inside the running pipeline; returns what it changed."""
        if not self._running or self._stop.is_set() or self._folder is None:
            raise PipelineStopped("the indexing pipeline is not running")
        if self._scans:
            raise PipelineBusy("a reindex is already running; try again when it has finished")
        token = next(self._tokens)
        done = self._scans[token] = anyio.Event()
        before = msgspec.structs.replace(self.stats)
        assert self._view is not None
        try:
            outbox = self._sends["events"].clone()
        except anyio.ClosedResourceError:
            self._scans.pop(token, None)
            raise PipelineStopped("the indexing pipeline is shutting down") from None
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
        size = self.config.queue_size
        events_tx, events_rx = anyio.create_memory_object_stream[Event](size)
        hashed_tx, hashed_rx = anyio.create_memory_object_stream[Hashed](size)
        chunked_tx, chunked_rx = anyio.create_memory_object_stream[Chunked](size)
        embedded_tx, embedded_rx = anyio.create_memory_object_stream[Embedded](size)
        self._sends = {"events": events_tx, "hashed": hashed_tx, "chunked": chunked_tx,
                       "embedded": embedded_tx}
        view = self._view = IndexView(self.config.sqlite_path)
        folder = self._folder = Folder(self.config.watch_dir, PathFilter(
            self.config.include, self.config.ignore, read_gitignore(self.config)))
        hasher = Hasher(root=folder.real, view=view, inflight=self.inflight, stats=self.stats,
                        max_bytes=self.config.max_file_bytes, converter=self.converter,
                        library_of=self.config.library_of, force=self.force)
        batcher = Batcher(embed=self.embed, dim=self.dim, view=view, stats=self.stats,
                          batch_size=self.config.embed_batch_size,
                          batch_tokens=self.config.embed_batch_tokens,
                          limiter=self.embed_limiter)
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._write, embedded_rx, name="pocketmcp.writer")
                tg.start_soon(self._embed, chunked_rx, embedded_tx, batcher,
                              name="pocketmcp.embedder")
                tg.start_soon(self._chunk, hashed_rx, chunked_tx, name="pocketmcp.chunker")
                tg.start_soon(self._hash, events_rx, hashed_tx, hasher,
                              name="pocketmcp.hasher")
                if self.source is not None:
                    tg.start_soon(self.source, events_tx, name="pocketmcp.watcher")
                elif self.follow:
                    tg.start_soon(self._watch, events_tx, folder, view, name="pocketmcp.watcher")
                else:
                    tg.start_soon(self._scan, events_tx, folder, view, name="pocketmcp.watcher")
        finally:
            self._running = False
            for done in self._scans.values():
                done.set()
            view.close()
            if self._own_converter:
                await self.converter.aclose()
        return self.stats

    async def _write(self, inbox: Any) -> None:
        await write_index(inbox, writer=self.writer, inflight=self.inflight, stats=self.stats,
                          batch_files=self.config.write_batch_files,
                          limiter=self.write_limiter, on_event=self.on_event,
                          on_scan_done=self._scan_finished)

    async def _watch(self, outbox: MemoryObjectSendStream[Event], folder: Folder,
                     view: IndexView) -> None:
        await watch_folder(outbox, folder=folder, view=view, stats=self.stats, stop=self._stop,
                           debounce_ms=self.config.debounce_ms)

    async def _scan(self, outbox: MemoryObjectSendStream[Event], folder: Folder,
                    view: IndexView) -> None:
        await scan_folder(outbox, folder=folder, view=view, stats=self.stats, stop=self._stop)

    async def _hash(self, inbox: Any, outbox: Any, hasher: Hasher) -> None:
        await hash_files(inbox, outbox, hasher=hasher, concurrency=self.config.read_concurrency)

    async def _chunk(self, inbox: Any, outbox: Any) -> None:
        await chunk_files(inbox, outbox, chunker=self.chunker, inflight=self.inflight,
                          stats=self.stats)

    async def _embed(self, inbox: Any, outbox: Any, batcher: Batcher) -> None:
        await embed_chunks(inbox, outbox, batcher=batcher)
