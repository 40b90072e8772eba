"""The two stages of writing a document to a SQLite index (the writer's side).

A document is written for keyword search as soon as it is chunked: chunks whose text the
index already holds get that vector at once, the others are written `waiting` (no row in
vec_chunks, no entry in the chunk log) and the document is queued in `embed_queue`. When
the embedder returns their vectors, `add_vectors` writes those chunks again with them,
under new chunk ids: ids only grow, as the vector file and the chunk lengths that follow
the chunk log need. Both stages run inside the writer's transactions, so neither is ever
half-written, and the second finds the document as the first left it or writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pocketmcp.errors import StoreError
from pocketmcp.messages import Chunk
from pocketmcp.store.sqlite.log import VECTOR_BY_ID


class StagedWrites:
    """Mixed into SqliteWriter, whose connection and chunk writing it uses."""

    dim: int

    def _sql(self, sql: str, args: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def _insert_chunks(self, doc_id: int, title: str, chunks: Sequence[Chunk],
                       vectors: Sequence[bytes | None]) -> None:
        raise NotImplementedError

    def _rows_of(self, chunks: Sequence[Chunk], vectors: bytes) -> list[bytes | None]:
        """Each chunk's vector, cut from the float32 matrix `vectors`."""
        width = self.dim * 4
        return [vectors[i * width:(i + 1) * width] for i in range(len(chunks))]

    def _known(self, chunks: Sequence[Chunk]) -> list[bytes | None]:
        """The stored vector of each chunk whose text the index holds with one (by digest),
        else None."""
        wanted = sorted({c.sha256 for c in chunks})
        owners: dict[str, int] = {}
        for start in range(0, len(wanted), 500):
            for sha, chunk_id in self._sql(
                    "SELECT text_sha256, chunk_id FROM chunks WHERE waiting = 0 AND "
                    "text_sha256 IN (SELECT value FROM json_each(?))",
                    (_texts(wanted[start:start + 500]),)).fetchall():
                owners.setdefault(sha, chunk_id)
        found: dict[str, bytes] = {}
        for sha, chunk_id in owners.items():
            row = self._sql(VECTOR_BY_ID, (chunk_id,)).fetchone()
            if row is not None and len(row[2]) == self.dim * 4:
                found[sha] = bytes(row[2])
        return [found.get(c.sha256) for c in chunks]

    def add_vectors(self, doc_id: int, sha256: str, chunks: Sequence[Chunk],
                    vectors: bytes) -> bool:
        """The vectors of a document's waiting `chunks`, as the embedder returned them for
        its text `sha256`: those chunks are written again with them. False, and nothing
        written, when the document has changed since (another version waits, or it is
        gone) or has its vectors already."""
        if len(vectors) != len(chunks) * self.dim * 4:
            raise StoreError(f"document {doc_id}: {len(chunks)} chunks but "
                             f"{len(vectors)} bytes of vectors (dim {self.dim})")
        row = self._sql("SELECT d.content_sha256, d.title FROM embed_queue q JOIN documents d "
                        "ON d.doc_id = q.doc_id WHERE q.doc_id = ?", (doc_id,)).fetchone()
        if row is None or row[0] != sha256:
            return False
        waiting = self._sql("SELECT chunk_id, idx, text_sha256 FROM chunks WHERE doc_id = ? "
                            "AND waiting = 1 ORDER BY idx", (doc_id,)).fetchall()
        if [(r[1], r[2]) for r in waiting] != [(c.idx, c.sha256) for c in chunks]:
            return False
        ids = [(r[0],) for r in waiting]
        self._many("DELETE FROM chunks_fts WHERE rowid = ?", ids)
        self._many("DELETE FROM chunks WHERE chunk_id = ?", ids)  # waiting: not logged
        self._insert_chunks(doc_id, str(row[1]), chunks, self._rows_of(chunks, vectors))
        self._sql("DELETE FROM embed_queue WHERE doc_id = ?", (doc_id,))
        return True


def _texts(values: Sequence[str]) -> str:
    return json.dumps(list(values))
