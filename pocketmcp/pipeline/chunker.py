"""Cuts each changed file into chunks, at most MAX_CHUNKS_PER_DOC of them.

The work per file is bounded by that number, whatever the length of its text, and a stop
(EOF, SIGTERM) does not wait for a file in progress: its thread stops after the piece at
hand, and the files not chunked yet are indexed at the next start.
"""

from __future__ import annotations

import threading
from functools import partial

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.core.chunking import Chunker
from pocketmcp.messages import Chunk, Chunked, FileChunked, FileHashed, Hashed
from pocketmcp.pipeline.state import InFlight, Stats

log = logs.get("pocketmcp.chunker")


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
    stop: anyio.Event | None = None,
) -> None:
    """Chunk each file; once `stop` is set, files not yet chunked (the one at hand too) are
    left unrecorded for the next start, so a stop never waits for a long text."""
    async with inbox, outbox:
        async for item in inbox:
            if not isinstance(item, FileHashed):
                await outbox.send(item)
                continue
            try:
                chunks, covered = await split_capped(chunker, item.text,
                                                     item.facts.body_start, most, halt=stop)
            except (ValueError, RuntimeError) as exc:  # the splitter's or tokenizer's own
                inflight.done(item.rel, item.seq)
                reason = f"cannot be chunked: {exc}"
                stats.skip(item.rel, reason)
                log.warning("skipped", path=item.rel, reason=reason)
                continue
            if stop is not None and stop.is_set():
                inflight.done(item.rel, item.seq)
                log.info("left_for_next_start", path=item.rel, reason="stopping")
                continue
            if covered < len(item.text):
                log.warning("cut", path=item.rel, chunks=len(chunks), indexed_chars=covered,
                            chars=len(item.text),
                            reason=f"the text makes more than {most} chunks "
                                   "(MAX_CHUNKS_PER_DOC): the rest is not indexed")
            await outbox.send(FileChunked(item, chunks))
