"""The second stage: vectors for the chunks that wait for them, most recent change first.

Documents are written for keyword search as soon as they are chunked: their chunks wait,
ranked in the index's embed queue (writer.py, batches.py). This actor takes the waiting
documents from the index itself, a few at a time and the most recently changed first, so a
note edited now goes ahead of the rest of a folder's first scan. Vectors of text the index
already holds are reused (by digest); the rest go to the model in batches bounded by count
and by tokens: padded (longest chunk x count) for the local model, whose memory grows with
both, summed for a remote provider. Each document's vectors go to the writer, which writes
them only if the document has not changed meanwhile.

The queue is the index, so a stop or a crash loses nothing: the chunks still waiting are
found again at the next start, and written once. A provider that fails a whole batch is
waited for when watching (the first stage goes on meanwhile: new and edited notes stay
searchable by keywords); one scan (`pocketmcp index`) ends with the error, its documents
written for keywords and waiting. A provider that refuses some texts leaves their documents
waiting until the next start. A stop lets the batch at hand finish and starts no other.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial

import anyio
import numpy as np
import numpy.typing as npt
from anyio.streams.memory import MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.core.chunking import stored_chunk
from pocketmcp.core.paths import path_of
from pocketmcp.embed.base import Batching
from pocketmcp.errors import InputRejected, ProviderError
from pocketmcp.messages import Chunk, ToWriter, VectorsFound
from pocketmcp.pipeline.budget import CpuBudget
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.state import Backlog, Stats
from pocketmcp.store.api import Reader, View
from pocketmcp.store.rows import WaitingDoc

log = logs.get("pocketmcp.embedder")

EmbedFn = Callable[[list[str]], Awaitable[npt.NDArray[np.float32]]]
LoadFn = Callable[[], Awaitable[None]]
FETCH_DOCS = 16  # waiting documents taken from the index at a time
# Nothing waiting: look again when woken (by the writer's commits, the scan's end, a stop),
# or after this long at most, watching. One scan never waits on it: the last commit or the
# scan's end wakes it, and it returns then.
IDLE_S = 5.0


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
    """One document waiting for its vectors."""

    def __init__(self, doc: WaitingDoc, dim: int) -> None:
        self.doc = doc
        self.chunks = tuple(stored_chunk(c.idx, c.start_off, c.end_off, c.text, c.tokens,
                                         c.text_sha256, c.section) for c in doc.chunks)
        self.vectors = np.zeros((len(self.chunks), dim), dtype=np.float32)
        self.missing = len(self.chunks)
        self.reused = 0
        self.embed_ms = 0.0
        self.dropped = False  # the provider refused one of its chunks

    def found(self) -> VectorsFound:
        return VectorsFound(self.doc.doc_id, self.doc.external_id, self.doc.sha256,
                            self.chunks, self.vectors.tobytes(), self.reused, self.embed_ms)


class Abandoned(Exception):
    """Stopping (while waiting for the provider, or with chunks still to embed): the
    documents not fully embedded stay waiting in the index for the next start."""


def _backlog(limit: int, skip: list[int],
             reader: Reader) -> tuple[list[WaitingDoc], dict[str, bytes]]:
    docs = reader.embed_backlog(limit, skip)
    digests = [c.text_sha256 for d in docs for c in d.chunks]
    return docs, reader.vectors_for(digests) if digests else {}


class Batcher:
    """Takes waiting documents from the index and sends their vectors to the writer."""

    def __init__(self, *, embed: EmbedFn, dim: int, view: View, stats: Stats,
                 batching: Batching, backlog: Backlog, scan_done: anyio.Event,
                 finish: bool = False, stop: anyio.Event | None = None,
                 halt: anyio.Event | None = None, give_way_s: float = 0.0,
                 budget: CpuBudget | None = None,
                 precedence: Precedence | None = None, load: LoadFn | None = None) -> None:
        self.embed = embed
        # The model, loaded before the first batch that needs it (not counted in embed_ms):
        # a run with nothing to embed never loads it.
        self.load = load
        self.precedence = precedence or Precedence()  # none: no search to give way to
        self.budget = budget  # INDEX_CPU_BUDGET: a pause after each batch that needs one
        self.dim = dim
        self.view = view
        self.stats = stats
        self.batch_size = batching.size
        self.batch_tokens = batching.tokens
        self.padded = batching.padded
        self.backlog = backlog
        self.scan_done = scan_done  # the first scan's keywords are committed
        self.finish = finish  # return once nothing waits (one scan), else follow for ever
        self.stop = stop  # set: a failing provider is waited for until this is set
        self.halt = halt  # once set, no new batch starts: a stop never waits for long
        self.give_way_s = give_way_s  # wait this long at most for the first scan's keywords
        self.waits = 0  # waits for the provider in a row
        self.slots: list[_Slot] = []
        self.todo: deque[tuple[_Slot, int]] = deque()  # chunks waiting for the model

    def _halted(self) -> bool:
        return self.halt is not None and self.halt.is_set()

    async def run(self, outbox: MemoryObjectSendStream[ToWriter]) -> None:
        async with outbox:
            try:
                await self._run(outbox)
            except Abandoned as exc:
                for slot in self.slots:  # those complete still go; the others stay waiting
                    if not slot.missing and not slot.dropped:
                        await self._send(outbox, slot)
                    else:
                        self.backlog.sent.discard(slot.doc.doc_id)
                log.info("vectors_left_waiting", reason=f"{exc}; they are embedded at the "
                                                        "next start")

    async def _run(self, outbox: MemoryObjectSendStream[ToWriter]) -> None:
        # The first scan's keywords first: they make the notes findable.
        until = time.monotonic() + self.give_way_s
        while not (self.scan_done.is_set() or self._halted()) and time.monotonic() < until:
            await self.backlog.wait(seconds=min(0.5, until - time.monotonic()))
        while not self._halted():
            scanned = self.scan_done.is_set()
            # Two batches ahead at most: a note edited meanwhile is taken soon after.
            while len(self.todo) < 2 * self.batch_size and await self._fetch():
                await self._send_done(outbox)  # those whose vectors were all known
            if not self.todo:
                if self.finish and scanned and not self.backlog.sent:
                    return
                await self.backlog.wait(seconds=IDLE_S)
                continue
            await self.precedence.give_way()  # a search in flight goes first
            if self.load is not None:
                load, self.load = self.load, None
                await load()
            await self.run_batch()
            await self._send_done(outbox)
            if self.budget is not None:  # after the vectors are sent on, not holding them
                await self.budget.pace()

    async def _fetch(self) -> bool:
        """Take the next waiting documents (those whose vectors are all known are done at
        once); whether any came."""
        docs, known = await self.view.run(partial(_backlog, FETCH_DOCS, self.backlog.skip()))
        for doc in docs:
            self.backlog.sent.add(doc.doc_id)  # taken: not fetched again until written
            slot = _Slot(doc, self.dim)
            missing = reuse(slot.chunks, known, slot.vectors)
            slot.reused = len(slot.chunks) - len(missing)
            slot.missing = len(missing)
            self.slots.append(slot)
            self.todo.extend((slot, i) for i in missing)
        return bool(docs)

    async def _send_done(self, outbox: MemoryObjectSendStream[ToWriter]) -> None:
        keep: list[_Slot] = []
        for slot in self.slots:
            if slot.dropped:
                continue
            if slot.missing:
                keep.append(slot)
            else:
                await self._send(outbox, slot)
        self.slots = keep

    async def _send(self, outbox: MemoryObjectSendStream[ToWriter], slot: _Slot) -> None:
        self.stats.chunks_reused += slot.reused
        await outbox.send(slot.found())

    def _take(self) -> list[tuple[_Slot, int]]:
        batch: list[tuple[_Slot, int]] = []
        longest = total = 0
        while self.todo and len(batch) < self.batch_size:
            slot, i = self.todo[0]
            if slot.dropped:
                self.todo.popleft()
                continue
            tokens = slot.chunks[i].tokens
            cost = max(longest, tokens) * (len(batch) + 1) if self.padded else total + tokens
            if batch and cost > self.batch_tokens:
                break
            longest = max(longest, tokens)
            total += tokens
            batch.append(self.todo.popleft())
        return batch

    async def run_batch(self) -> None:
        if self._halted():
            raise Abandoned("stopping")
        batch = self._take()
        if not batch:
            return
        texts = [slot.chunks[i].embed_text for slot, i in batch]
        started = time.perf_counter()
        try:
            vectors = await self.embed(texts)
        except InputRejected as exc:  # some texts refused: their documents stay waiting
            vectors = exc.vectors
            for position, reason in exc.rejected.items():
                self._drop(batch[position][0], reason)
        except ProviderError as exc:  # the whole batch failed: try it again later
            self.todo.extendleft(reversed(batch))
            await self._wait_for_provider(exc)
            return
        self.waits = 0
        elapsed = (time.perf_counter() - started) * 1000
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
        self.backlog.sent.discard(slot.doc.doc_id)
        self.backlog.refused.add(slot.doc.doc_id)
        where = path_of(slot.doc.external_id, "file") or slot.doc.external_id
        why = (f"the embedding provider refused a chunk: {reason}; the document stays "
               "searchable by keywords")
        self.stats.skip(where, why)
        log.warning("vectors_refused", path=where, reason=why)

    async def _wait_for_provider(self, exc: ProviderError) -> None:
        """Wait until the provider is to be tried again; Abandoned when stopping meanwhile.
        Without a stop event to wait on, the error ends the stage."""
        if self.stop is None:
            raise exc
        self.waits += 1
        delay = exc.retry_in if exc.retry_in is not None else min(60.0, 2.0 ** self.waits)
        self.stats.last_error = str(exc)
        log.warning("embedding_waits", error=str(exc), retry_in_s=round(delay, 3),
                    chunks_waiting=len(self.todo),
                    documents_waiting=sum(1 for s in self.slots if s.missing))
        with anyio.move_on_after(delay):
            await self.stop.wait()
        if self.stop.is_set():
            raise Abandoned("stopping while the embedding provider fails")
