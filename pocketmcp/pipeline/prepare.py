"""Documents handed in by tools, made ready for the writer: chunked and embedded.

The same steps as the chunker and embedder actors take for files, run in the caller's task
(a tool waits for its own documents, not behind the folder's queue). Vectors of text that the
target index already holds are reused by digest, as the embedder actor does. All texts are
chunked (and refused over the limits) before any is embedded, so progress counts toward a
known total. When the index has an embedder running beside its writer (`defer`), an embedding
provider that is down does not refuse the documents: those not embedded yet are written for
keyword search, found at once, and their chunks wait for that embedder.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import numpy as np

from pocketmcp import logs
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.base import Embedder
from pocketmcp.errors import InvalidRequest, ProviderUnavailable
from pocketmcp.messages import Chunk, DocRecord, PreparedDoc
from pocketmcp.pipeline.chunker import split_capped
from pocketmcp.pipeline.embedder import reuse
from pocketmcp.store.api import ReadIndex, StoredVectors

log = logs.get("pocketmcp.prepare")

Progress = Callable[[int, int | None, str], Awaitable[None]]  # done, total, message


class Preparer:
    def __init__(self, chunker: Chunker, embedder: Embedder, *, most: int,
                 defer: bool = False) -> None:
        self.chunker = chunker
        self.most = most
        self.defer = defer  # an embedder beside the writer takes what the provider cannot
        self.embedder = embedder
        self.batch_size = embedder.batching.size

    async def prepare(self, records: Sequence[DocRecord], index: ReadIndex, *,
                      progress: Progress | None = None) -> tuple[PreparedDoc, ...]:
        """Each record's chunks and vectors; vectors stored in `index` are reused.
        `progress(done, total, message)` is awaited after each batch of chunks embedded."""
        split = [await self._chunks(record) for record in records]
        vectors: list[np.ndarray] = []
        missing: list[list[int]] = []
        for chunks in split:
            known = await index.run(partial(_vectors_for, [c.sha256 for c in chunks]))
            vectors.append(np.zeros((len(chunks), self.embedder.dim), dtype=np.float32))
            missing.append(reuse(chunks, known, vectors[-1]))
        total, done = sum(len(m) for m in missing), 0
        complete = [not todo for todo in missing]
        try:
            for at, (chunks, found, todo) in enumerate(zip(split, vectors, missing,
                                                           strict=True)):
                for start in range(0, len(todo), self.batch_size):
                    part = todo[start:start + self.batch_size]
                    found[part] = await self.embedder.embed_documents(
                        [chunks[i].embed_text for i in part])
                    done += len(part)
                    if progress is not None:
                        await progress(done, total, f"{done} of {total} chunks embedded")
                complete[at] = True
        except ProviderUnavailable as exc:
            if not self.defer:
                raise
            log.warning("vectors_deferred", documents=complete.count(False),
                        reason=f"{exc}; written for keyword search, their vectors follow "
                               "when the provider answers")
        return tuple(
            PreparedDoc(record, chunks, found.tobytes(), len(chunks) - len(todo)) if whole
            else PreparedDoc(record, chunks, b"", waiting=True)
            for record, chunks, found, todo, whole in zip(records, split, vectors, missing,
                                                          complete, strict=True))

    async def _chunks(self, record: DocRecord) -> tuple[Chunk, ...]:
        body = len(record.content) - record.facts.body_start
        limit = self.most * self.chunker.size  # chunks hold at most CHUNK_SIZE characters
        if body > limit:
            raise InvalidRequest(
                f"a text of {body} characters makes more than {self.most} chunks, the most "
                f"one document makes: at most {limit} characters fit ({self.most} x "
                "CHUNK_SIZE); split it into several documents")
        chunks, covered = await split_capped(self.chunker, record.content,
                                             record.facts.body_start, self.most)
        if covered < len(record.content):
            raise InvalidRequest(
                f"the text makes more than {self.most} chunks, the most one document makes; "
                f"the first {covered} characters fit: split it into several documents")
        return chunks


def _vectors_for(digests: list[str], reader: StoredVectors) -> dict[str, bytes]:
    return reader.vectors_for(digests)
