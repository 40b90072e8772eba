"""Documents handed in by tools, made ready for the writer: chunked and embedded.

The same steps as the chunker and embedder actors take for files, run in the caller's task
(a tool waits for its own documents, not behind the folder's queue). Vectors of text that the
target index already holds are reused by digest, as the embedder actor does.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import numpy as np

from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.base import Embedder
from pocketmcp.messages import DocRecord, PreparedDoc
from pocketmcp.pipeline.embedder import reuse
from pocketmcp.store.readers import ReadIndex


class Preparer:
    def __init__(self, chunker: Chunker, embedder: Embedder) -> None:
        self.chunker = chunker
        self.embedder = embedder
        self.batch_size = embedder.batching.size

    async def prepare(self, records: Sequence[DocRecord], index: ReadIndex
                      ) -> tuple[PreparedDoc, ...]:
        """Each record's chunks and vectors; vectors stored in `index` are reused."""
        return tuple([await self._prepare(record, index) for record in records])

    async def _prepare(self, record: DocRecord, index: ReadIndex) -> PreparedDoc:
        chunks = await anyio.to_thread.run_sync(self.chunker.split, record.content,
                                                record.facts.body_start)
        digests = [c.sha256 for c in chunks]
        known = await index.run(lambda reader: reader.vectors_for(digests))
        vectors = np.zeros((len(chunks), self.embedder.dim), dtype=np.float32)
        missing = reuse(chunks, known, vectors)
        for start in range(0, len(missing), self.batch_size):
            part = missing[start:start + self.batch_size]
            vectors[part] = await self.embedder.embed_documents(
                [chunks[i].embed_text for i in part])
        return PreparedDoc(record, chunks, vectors.tobytes(), len(chunks) - len(missing))
