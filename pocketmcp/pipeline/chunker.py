"""Cuts each changed file into chunks, at most MAX_CHUNKS_PER_DOC of them.

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
from pocketmcp.pipeline.state import InFlight, Stats

log = logs.get("pocketmcp.chunker")

# Files chunked at a time: two cores' worth (one when there is one), what the tokenizer can
# use while the rest of the pipeline waits on it.
THREADS = min(2, os.cpu_count() or 1)


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
    stop: anyio.Event | None = None, threads: int = THREADS,
) -> None:
    """Chunk each file, `threads` files at a time (the tokenizer works outside the
    interpreter's lock), passing them on in the order they came, so a file's versions keep
    theirs; once `stop` is set, files not yet chunked (those at hand too) are left unrecorded
    for the next start, so a stop never waits for a long text."""
    ahead_tx, ahead_rx = anyio.create_memory_object_stream[_Ahead](max(threads - 1, 0))
    limiter = anyio.CapacityLimiter(max(threads, 1))

    async def cut(item: FileHashed, ahead: _Ahead) -> None:
        try:
            async with limiter:
                ahead.result = await split_capped(chunker, item.text, item.facts.body_start,
                                                  most, halt=stop)
        except (ValueError, RuntimeError) as exc:  # the splitter's or tokenizer's own
            ahead.error = exc
        finally:
            ahead.done.set()

    async def start_all(tg: anyio.abc.TaskGroup) -> None:
        async with inbox, ahead_tx:
            async for item in inbox:
                ahead = _Ahead(item)
                if isinstance(item, FileHashed):
                    tg.start_soon(cut, item, ahead)
                else:
                    ahead.done.set()
                await ahead_tx.send(ahead)

    async with outbox, anyio.create_task_group() as tg:
        tg.start_soon(start_all, tg)
        async with ahead_rx:
            async for ahead in ahead_rx:
                await ahead.done.wait()
                await _pass_on(ahead, outbox, inflight=inflight, stats=stats, most=most,
                               stop=stop)


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
        log.warning("cut", path=item.rel, chunks=len(chunks), indexed_chars=covered,
                    chars=len(item.text),
                    reason=f"the text makes more than {most} chunks "
                           "(MAX_CHUNKS_PER_DOC): the rest is not indexed")
    await outbox.send(FileChunked(item, chunks))
