"""Batches chunks across files for the model, reusing vectors of text already indexed.

Batches are bounded by count and by padded tokens (longest chunk x count), since the model's
memory grows with both. A batch goes to the model as soon as it is full or the inbox is
empty, so nothing waits on a timer. Files leave in the order they came.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio
import numpy as np
import numpy.typing as npt
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp.messages import Chunk, Chunked, Embedded, FileChunked, FileEmbedded
from pocketmcp.pipeline.state import Stats
from pocketmcp.store.readers import ReaderPool

EmbedFn = Callable[[list[str]], Awaitable[npt.NDArray[np.float32]]]


def reuse(chunks: Sequence[Chunk], known: Mapping[str, bytes], out: npt.NDArray[np.float32]
          ) -> list[int]:
    """Fill `out` with the stored vectors of chunks whose text is already indexed (by digest);
    the positions of the chunks that still need the model."""
    width = out.shape[1] * 4
    missing: list[int] = []
    for i, chunk in enumerate(chunks):
        vector = known.get(chunk.sha256)
        if vector is not None and len(vector) == width:
            out[i] = np.frombuffer(vector, dtype=np.float32)
        else:
            missing.append(i)
    return missing


class _Slot:
    """One file waiting for its vectors."""

    def __init__(self, item: FileChunked, dim: int) -> None:
        self.item = item
        self.vectors = np.zeros((len(item.chunks), dim), dtype=np.float32)
        self.missing = len(item.chunks)
        self.reused = 0
        self.embed_ms = 0.0


class Batcher:
    def __init__(self, *, embed: EmbedFn, dim: int, view: ReaderPool | None, stats: Stats,
                 batch_size: int, batch_tokens: int) -> None:
        self.embed = embed
        self.dim = dim
        self.view = view
        self.stats = stats
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.queue: deque[_Slot | Embedded] = deque()  # in arrival order
        self.todo: deque[tuple[_Slot, int]] = deque()  # chunks waiting for the model

    async def add(self, item: Chunked) -> None:
        if not isinstance(item, FileChunked):
            self.queue.append(item)
            return
        slot = _Slot(item, self.dim)
        self.queue.append(slot)
        known: dict[str, bytes] = {}
        if self.view is not None and item.chunks:
            digests = [c.sha256 for c in item.chunks]
            known = await self.view.run(lambda reader: reader.vectors_for(digests))
        missing = reuse(item.chunks, known, slot.vectors)
        slot.reused = len(item.chunks) - len(missing)
        slot.missing = len(missing)
        self.todo.extend((slot, i) for i in missing)

    def full(self) -> bool:
        return len(self.todo) >= self.batch_size or self._tokens_waiting() >= self.batch_tokens

    def _tokens_waiting(self) -> int:
        longest = max((s.item.chunks[i].tokens for s, i in self.todo), default=0)
        return longest * len(self.todo)

    def _take(self) -> list[tuple[_Slot, int]]:
        batch: list[tuple[_Slot, int]] = []
        longest = 0
        while self.todo and len(batch) < self.batch_size:
            slot, i = self.todo[0]
            tokens = slot.item.chunks[i].tokens
            if batch and max(longest, tokens) * (len(batch) + 1) > self.batch_tokens:
                break
            longest = max(longest, tokens)
            batch.append(self.todo.popleft())
        return batch

    async def run_batch(self) -> None:
        batch = self._take()
        if not batch:
            return
        texts = [slot.item.chunks[i].embed_text for slot, i in batch]
        started = time.perf_counter()
        vectors = await self.embed(texts)
        elapsed = (time.perf_counter() - started) * 1000
        self.stats.embed_ms += elapsed
        self.stats.chunks_embedded += len(batch)
        for row, (slot, i) in enumerate(batch):
            slot.vectors[i] = vectors[row]
            slot.missing -= 1
            slot.embed_ms += elapsed / len(batch)

    def ready(self) -> list[Embedded]:
        """Items at the head of the queue whose vectors are all there."""
        out: list[Embedded] = []
        while self.queue:
            head = self.queue[0]
            if isinstance(head, _Slot):
                if head.missing:
                    break
                self.stats.chunks_reused += head.reused
                out.append(FileEmbedded(head.item.doc, head.item.chunks, head.vectors.tobytes(),
                                        head.reused, head.embed_ms))
            else:
                out.append(head)
            self.queue.popleft()
        return out


async def embed_chunks(
    inbox: MemoryObjectReceiveStream[Chunked], outbox: MemoryObjectSendStream[Embedded], *,
    batcher: Batcher,
) -> None:
    async with inbox, outbox:
        done = False
        while not done:
            try:
                item = inbox.receive_nowait()
            except anyio.WouldBlock:
                if batcher.todo:
                    await batcher.run_batch()
                else:
                    try:
                        item = await inbox.receive()
                    except anyio.EndOfStream:
                        done = True
                    else:
                        await batcher.add(item)
            except anyio.EndOfStream:
                done = True
            else:
                await batcher.add(item)
            while batcher.full():
                await batcher.run_batch()
            if done:
                while batcher.todo:
                    await batcher.run_batch()
            for out in batcher.ready():
                await outbox.send(out)
