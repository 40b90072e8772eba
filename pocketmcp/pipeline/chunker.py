"""Cuts each changed file into chunks."""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.core.chunking import Chunker
from pocketmcp.messages import Chunked, FileChunked, FileHashed, Hashed
from pocketmcp.pipeline.state import InFlight, Stats

log = logs.get("pocketmcp.chunker")


async def chunk_files(
    inbox: MemoryObjectReceiveStream[Hashed], outbox: MemoryObjectSendStream[Chunked], *,
    chunker: Chunker, inflight: InFlight, stats: Stats,
) -> None:
    async with inbox, outbox:
        async for item in inbox:
            if not isinstance(item, FileHashed):
                await outbox.send(item)
                continue
            try:
                chunks = await anyio.to_thread.run_sync(chunker.split, item.text,
                                                        item.facts.body_start)
            except (ValueError, RuntimeError) as exc:  # the splitter's or tokenizer's own
                inflight.done(item.rel, item.seq)
                stats.skipped += 1
                log.warning("skipped", path=item.rel, reason=f"cannot be chunked: {exc}")
                continue
            await outbox.send(FileChunked(item, chunks))
