"""The chunker cuts files two at a time and still passes them on in the order they came:
a long file ahead of short ones, a scan's end marker, and two versions of one file keep
their places."""

from __future__ import annotations

import anyio

from pocketmcp.core.chunking import Chunker
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunked, FileChunked, FileHashed, Hashed, ScanDone
from pocketmcp.pipeline.chunker import chunk_files
from pocketmcp.pipeline.state import InFlight, Stats


def _file(rel: str, text: str, seq: int) -> FileHashed:
    return FileHashed(rel=rel, seq=seq, uri=f"file:///{rel}", title=rel, text=text,
                      sha256=sha256(text), size=len(text), mtime_ns=seq)


async def _run(chunker: Chunker, items: list[Hashed], threads: int
               ) -> tuple[list[Chunked], Stats]:
    send_in, inbox = anyio.create_memory_object_stream[Hashed](len(items))
    outbox, received = anyio.create_memory_object_stream[Chunked](len(items))
    for item in items:
        send_in.send_nowait(item)
    send_in.close()
    stats = Stats()
    inflight = InFlight()
    for item in items:
        if isinstance(item, FileHashed):
            inflight.begin(item.rel, item.sha256)
    with anyio.fail_after(120):
        await chunk_files(inbox, outbox, chunker=chunker, inflight=inflight, stats=stats,
                          most=10_000, threads=threads)
    async with received:
        return [item async for item in received], stats


async def test_files_come_out_in_the_order_they_went_in(fake_chunker: Chunker) -> None:
    long_text = "\n\n".join(f"Paragraph {i} of the long note about rivers and their deltas."
                            * 8 for i in range(300))
    items: list[Hashed] = [_file("long.md", long_text, 1)]
    items += [_file(f"short{i}.md", f"A short note number {i}.", 2 + i) for i in range(6)]
    items.append(ScanDone(7))
    items += [_file("same.md", "The first version.", 10), _file("same.md", "The second.", 11)]
    for threads in (1, 2):
        out, stats = await _run(fake_chunker, items, threads)
        names = [(o.doc.rel, o.doc.seq) if isinstance(o, FileChunked) else "scan done"
                 for o in out]
        assert names == [("long.md", 1), *[(f"short{i}.md", 2 + i) for i in range(6)],
                         "scan done", ("same.md", 10), ("same.md", 11)]
        long_chunks = next(o for o in out if isinstance(o, FileChunked)
                           and o.doc.rel == "long.md").chunks
        assert len(long_chunks) > 20 and long_chunks[-1].end == len(long_text)
        assert stats.skipped == 0
