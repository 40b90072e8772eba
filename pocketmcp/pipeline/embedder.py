"""Batches chunks across files for the model, reusing vectors of text already indexed.

Batches are bounded by count and by tokens: padded (longest chunk x count) for the local
model, whose memory grows with both, summed for a remote provider. A batch goes to the model
as soon as it is full or the inbox is empty, so nothing waits on a timer. Files leave in the
order they came.

A remote provider can fail. When it refuses some texts, their files are skipped (logged, not
recorded: a later scan tries them again) and the rest go on. When it fails a whole batch,
the batch goes back to the head of the queue and, when watching, the stage waits until the
provider is to be tried again: everything upstream waits with it (backpressure), nothing is
recorded as indexed meanwhile, and stopping abandons the waiting files to the next start.
One scan (`pocketmcp index`) ends with the error instead.

A stop (EOF, SIGTERM) lets the batch at hand finish, then starts no other: files with all
their vectors go on to be committed, the others are left unrecorded for the next start, so
a stop never waits for a long file's hundreds of chunks.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio
import numpy as np
import numpy.typing as npt
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.embed.base import Batching
from pocketmcp.errors import InputRejected, ProviderError
from pocketmcp.messages import Chunk, Chunked, Embedded, FileChunked, FileEmbedded
from pocketmcp.pipeline.budget import CpuBudget
from pocketmcp.pipeline.state import InFlight, Stats
from pocketmcp.store.api import View

log = logs.get("pocketmcp.embedder")

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
        self.dropped = False  # the provider refused one of its chunks


class Abandoned(Exception):
    """Stopping (while waiting for the provider, or with chunks still to embed): the files
    not fully embedded are left for the next start."""


class Batcher:
    def __init__(self, *, embed: EmbedFn, dim: int, view: View | None, stats: Stats,
                 batching: Batching, inflight: InFlight | None = None,
                 stop: anyio.Event | None = None, halt: anyio.Event | None = None,
                 budget: CpuBudget | None = None) -> None:
        self.embed = embed
        self.budget = budget  # INDEX_CPU_BUDGET: a pause after each batch that needs one
        self.dim = dim
        self.view = view
        self.stats = stats
        self.batch_size = batching.size
        self.batch_tokens = batching.tokens
        self.padded = batching.padded
        self.inflight = inflight if inflight is not None else InFlight()  # empty is falsy
        self.stop = stop  # set: a failing provider is waited for until this is set
        self.halt = halt  # once set, no new batch starts: a stop never waits for long files
        self.waits = 0  # waits for the provider in a row
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
        counts = [s.item.chunks[i].tokens for s, i in self.todo]
        if not self.padded:
            return sum(counts)
        return max(counts, default=0) * len(counts)

    def _take(self) -> list[tuple[_Slot, int]]:
        batch: list[tuple[_Slot, int]] = []
        longest = total = 0
        while self.todo and len(batch) < self.batch_size:
            slot, i = self.todo[0]
            if slot.dropped:
                self.todo.popleft()
                continue
            tokens = slot.item.chunks[i].tokens
            cost = max(longest, tokens) * (len(batch) + 1) if self.padded else total + tokens
            if batch and cost > self.batch_tokens:
                break
            longest = max(longest, tokens)
            total += tokens
            batch.append(self.todo.popleft())
        return batch

    async def run_batch(self) -> None:
        if self.halt is not None and self.halt.is_set():
            raise Abandoned("stopping")
        batch = self._take()
        if not batch:
            return
        texts = [slot.item.chunks[i].embed_text for slot, i in batch]
        started = time.perf_counter()
        try:
            vectors = await self.embed(texts)
        except InputRejected as exc:  # some texts refused: their files are skipped
            vectors = exc.vectors
            for position, reason in exc.rejected.items():
                self._drop(batch[position][0], reason)
        except ProviderError as exc:  # the whole batch failed: try it again later
            self.todo.extendleft(reversed(batch))
            await self._wait_for_provider(exc)
            return
        self.waits = 0
        elapsed = (time.perf_counter() - started) * 1000
        if self.budget is not None:
            await self.budget.pace()
        self.stats.embed_ms += elapsed
        self.stats.chunks_embedded += len(batch)
        for row, (slot, i) in enumerate(batch):
            if slot.dropped:
                continue
            slot.vectors[i] = vectors[row]
            slot.missing -= 1
            slot.embed_ms += elapsed / len(batch)

    def _drop(self, slot: _Slot, reason: str) -> None:
        if slot.dropped:
            return
        slot.dropped = True
        self.inflight.done(slot.item.doc.rel, slot.item.doc.seq)
        why = f"the embedding provider refused a chunk: {reason}"
        self.stats.skip(slot.item.doc.rel, why)
        log.warning("skipped", path=slot.item.doc.rel, reason=why)

    async def _wait_for_provider(self, exc: ProviderError) -> None:
        """Wait until the provider is to be tried again; Abandoned when stopping meanwhile.
        Without a stop event to wait on, the error ends the stage."""
        if self.stop is None:
            raise exc
        self.waits += 1
        delay = exc.retry_in if exc.retry_in is not None else min(60.0, 2.0 ** self.waits)
        self.stats.last_error = str(exc)
        log.warning("embedding_waits", error=str(exc), retry_in_s=round(delay, 3),
                    chunks_waiting=len(self.todo), files_waiting=self._files_waiting())
        with anyio.move_on_after(delay):
            await self.stop.wait()
        if self.stop.is_set():
            raise Abandoned("stopping while the embedding provider fails")

    def _files_waiting(self) -> int:
        return sum(1 for item in self.queue if isinstance(item, _Slot) and not item.dropped)

    def abandon(self, why: str) -> list[Embedded]:
        """Give up the files still waiting for vectors (they stay unrecorded, for the next
        start); files with all their vectors, and what else is queued (removals, stat
        updates, scan markers), still go on."""
        out: list[Embedded] = []
        dropped = 0
        for item in self.queue:
            if not isinstance(item, _Slot):
                out.append(item)
            elif item.dropped:
                continue
            elif item.missing == 0:
                self.stats.chunks_reused += item.reused
                out.append(FileEmbedded(item.item.doc, item.item.chunks,
                                        item.vectors.tobytes(), item.reused, item.embed_ms))
            else:
                dropped += 1
                self.inflight.done(item.item.doc.rel, item.item.doc.seq)
        self.queue.clear()
        self.todo.clear()
        if dropped:
            log.warning("abandoned", files=dropped,
                        reason=f"{why}; they are indexed at the next start")
        return out

    def ready(self) -> list[Embedded]:
        """Items at the head of the queue whose vectors are all there."""
        out: list[Embedded] = []
        while self.queue:
            head = self.queue[0]
            if isinstance(head, _Slot) and head.dropped:
                self.queue.popleft()
                continue
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
        try:
            await _embed_all(inbox, outbox, batcher)
        except Abandoned as exc:
            for out in batcher.abandon(str(exc)):
                await outbox.send(out)
            async for item in inbox:  # the feed has stopped: what is left drains unembedded
                if isinstance(item, FileChunked):
                    batcher.inflight.done(item.doc.rel, item.doc.seq)
                else:
                    await outbox.send(item)


async def _embed_all(inbox: MemoryObjectReceiveStream[Chunked],
                     outbox: MemoryObjectSendStream[Embedded], batcher: Batcher) -> None:
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
