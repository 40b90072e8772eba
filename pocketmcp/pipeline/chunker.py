"""Cuts each changed file into chunks, at most 1000 of them (the most one document makes).

The work per file is bounded by that number, whatever the length of its text, and a stop
(EOF, SIGTERM) does not wait for a file in progress: its thread stops after the piece at
hand, and the files not chunked yet are indexed at the next start.
"""

from __future__ import annotations

import os
import threading
from functools import partial

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.core.chunking import Chunker
from pocketmcp.messages import Chunk, Chunked, FileChunked, FileHashed, Hashed
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.state import InFlight, Stats

log = logs.get("pocketmcp.chunker")

# Groups of files chunked at a time: two cores' worth (one when there is one). Cutting is
# mostly work under the interpreter's lock since token counts need no tokenizer call
# (core/token_count.py); a second group keeps the chunker going while the other waits for
# the lock, and texts the tokenizer must count itself are counted outside it.
THREADS = min(2, os.cpu_count() or 1)
GROUP_FILES = 8  # files waiting together cut in one worker-thread step, at most


async def split_capped(chunker: Chunker, text: str, skip: int, most: int, *,
                       halt: anyio.Event | None = None) -> tuple[tuple[Chunk, ...], int]:
    """Chunker.split_capped in a worker thread. If the caller is cancelled (or `halt` is
    set) it does not wait: the thread is told to stop and ends after the piece at hand (a
    fraction of a second), so it cannot keep the process alive either."""
    stop = threading.Event()

    def stopped() -> bool:
        return stop.is_set() or (halt is not None and halt.is_set())

    try:
        return await anyio.to_thread.run_sync(
            partial(chunker.split_capped, text, skip, most=most, stop=stopped),
            abandon_on_cancel=True)
    finally:
        stop.set()


async def chunk_files(
    inbox: MemoryObjectReceiveStream[Hashed], outbox: MemoryObjectSendStream[Chunked], *,
    chunker: Chunker, inflight: InFlight, stats: Stats, most: int,
    stop: anyio.Event | None = None, threads: int = THREADS, group: int = GROUP_FILES,
    precedence: Precedence | None = None,
) -> None:
    """Chunk each file, `threads` groups of files at a time (one cuts while the other waits for the
    interpreter's lock), passing them on in the order they came, so a file's versions keep
    theirs; once `stop` is set, files not yet chunked (those at hand too) are left
    unrecorded for the next start, so a stop never waits for a long text. Files that wait
    together (a scan) are cut up to `group` in one worker-thread step: one hop off the event
    loop, which searches share, for several files."""
    searches = precedence or Precedence()  # none: no search to give way to
    ahead_tx, ahead_rx = anyio.create_memory_object_stream[list[_Ahead]](max(threads - 1, 0))
    limiter = anyio.CapacityLimiter(max(threads, 1))

    async def cut(items: list[_Ahead], files: list[FileHashed]) -> None:
        try:
            async with limiter:
                results = await split_all(chunker, [(f.text, f.facts.body_start)
                                                    for f in files], most, halt=stop)
            for ahead, result in zip(items, results, strict=True):
                if isinstance(result, Exception):
                    ahead.error = result
                else:
                    ahead.result = result
        finally:
            for ahead in items:
                ahead.done.set()

    async def start_all(tg: anyio.abc.TaskGroup) -> None:
        async with inbox, ahead_tx:
            async for first in inbox:
                await searches.give_way()  # a search in flight goes first
                items = [first]
                while len(items) < group:
                    try:
                        items.append(inbox.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                aheads = [_Ahead(item) for item in items]
                cutting = [a for a in aheads if isinstance(a.item, FileHashed)]
                files = [a.item for a in cutting if isinstance(a.item, FileHashed)]
                for ahead in aheads:
                    if not isinstance(ahead.item, FileHashed):
                        ahead.done.set()
                if files:
                    tg.start_soon(cut, cutting, files)
                await ahead_tx.send(aheads)

    async with outbox, anyio.create_task_group() as tg:
        tg.start_soon(start_all, tg)
        async with ahead_rx:
            async for aheads in ahead_rx:
                for ahead in aheads:
                    await ahead.done.wait()
                    await _pass_on(ahead, outbox, inflight=inflight, stats=stats, most=most,
                                   stop=stop)


async def split_all(chunker: Chunker, texts: list[tuple[str, int]], most: int, *,
                    halt: anyio.Event | None = None
                    ) -> list[tuple[tuple[Chunk, ...], int] | Exception]:
    """split_capped of each (text, skip) in one worker thread, in turn: a text the splitter
    or tokenizer refuses gets its error in its place. Stops as split_capped does."""
    stop = threading.Event()

    def stopped() -> bool:
        return stop.is_set() or (halt is not None and halt.is_set())

    def run() -> list[tuple[tuple[Chunk, ...], int] | Exception]:
        out: list[tuple[tuple[Chunk, ...], int] | Exception] = []
        for text, skip in texts:
            try:
                out.append(chunker.split_capped(text, skip, most=most, stop=stopped))
            except (ValueError, RuntimeError) as exc:  # the splitter's or tokenizer's own
                out.append(exc)
        return out

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    finally:
        stop.set()


class _Ahead:
    """A file given to the chunker: its chunks once they are cut (or why they are not)."""

    def __init__(self, item: Hashed) -> None:
        self.item = item
        self.done = anyio.Event()
        self.result: tuple[tuple[Chunk, ...], int] | None = None
        self.error: Exception | None = None


async def _pass_on(ahead: _Ahead, outbox: MemoryObjectSendStream[Chunked], *,
                   inflight: InFlight, stats: Stats, most: int,
                   stop: anyio.Event | None) -> None:
    item = ahead.item
    if not isinstance(item, FileHashed):
        await outbox.send(item)
        return
    if ahead.error is not None or ahead.result is None:
        inflight.done(item.rel, item.seq)
        reason = f"cannot be chunked: {ahead.error}"
        stats.skip(item.rel, reason)
        log.warning("skipped", path=item.rel, reason=reason)
        return
    chunks, covered = ahead.result
    if stop is not None and stop.is_set():
        inflight.done(item.rel, item.seq)
        log.info("left_for_next_start", path=item.rel, reason="stopping")
        return
    if covered < len(item.text):
        reason = (f"the text makes more than {most} chunks, the most one document makes: "
                  "the rest is not indexed")
        log.warning("cut", path=item.rel, chunks=len(chunks), indexed_chars=covered,
                    chars=len(item.text), reason=reason)
        stats.cut_short(item.rel, f"characters {covered:,} to {len(item.text):,} not "
                        f"indexed: {reason.split(':')[0]}")
    await outbox.send(FileChunked(item, chunks))
