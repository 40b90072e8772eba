"""Documents handed in by tools, made ready for the writer: chunked and embedded.

The same steps as the chunker and embedder actors take for files, run in the caller's task
(a tool waits for its own documents, not behind the folder's queue). Vectors of text that the
target index already holds are reused by digest, as the embedder actor does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.base import Embedder
from pocketmcp.errors import InvalidRequest
from pocketmcp.messages import DocRecord, PreparedDoc
from pocketmcp.pipeline.chunker import split_capped
from pocketmcp.pipeline.embedder import reuse
from pocketmcp.store.api import ReadIndex


class Preparer:
    def __init__(self, chunker: Chunker, embedder: Embedder, *, most: int) -> None:
        self.chunker = chunker
        self.most = most
        self.embedder = embedder
        self.batch_size = embedder.batching.size

    async def prepare(self, records: Sequence[DocRecord], index: ReadIndex
                      ) -> tuple[PreparedDoc, ...]:
        """Each record's chunks and vectors; vectors stored in `index` are reused."""
        return tuple([await self._prepare(record, index) for record in records])

    async def _prepare(self, record: DocRecord, index: ReadIndex) -> PreparedDoc:
        body = len(record.content) - record.facts.body_start
        limit = self.most * self.chunker.size  # chunks hold at most CHUNK_SIZE characters
        if body > limit:
            raise InvalidRequest(
                f"a text of {body} characters makes more than {self.most} chunks: at most "
                f"{limit} characters fit (MAX_CHUNKS_PER_DOC x CHUNK_SIZE); split it into "
                "several documents")
        chunks, covered = await split_capped(self.chunker, record.content,
                                             record.facts.body_start, self.most)
        if covered < len(record.content):
            raise InvalidRequest(
                f"the text makes more than {self.most} chunks (MAX_CHUNKS_PER_DOC); the first "
                f"{covered} characters fit: split it into several documents")
        digests = [c.sha256 for c in chunks]
        known = await index.run(lambda reader: reader.vectors_for(digests))
        vectors = np.zeros((len(chunks), self.embedder.dim), dtype=np.float32)
        missing = reuse(chunks, known, vectors)
        for start in range(0, len(missing), self.batch_size):
            part = missing[start:start + self.batch_size]
            vectors[part] = await self.embedder.embed_documents(
                [chunks[i].embed_text for i in part])
        return PreparedDoc(record, chunks, vectors.tobytes(), len(chunks) - len(missing))
