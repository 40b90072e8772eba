"""Chunks that wait for their vectors, as a SQLite index keeps them (read side).

A document is written in two stages: its text and keywords as soon as it is chunked (its
chunks marked `waiting`, with a row in `embed_queue` ranking it), and its vectors once the
embedder returns them (writes.py). Waiting chunks have no row in vec_chunks and no entry in
the chunk log, so the vector file never sees them; keyword search finds them at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmcp.store.rows import WaitingDoc, waiting_docs
from pocketmcp.store.sqlite.connect import id_list

_WAITING_DOCS = (
    "SELECT q.doc_id, d.external_id, d.content_sha256, d.content FROM embed_queue q "
    "JOIN documents d ON d.doc_id = q.doc_id "
    "WHERE q.doc_id NOT IN (SELECT value FROM json_each(?)) "
    "ORDER BY q.rank DESC, q.doc_id DESC LIMIT ?")
_WAITING_CHUNKS = (
    "SELECT doc_id, idx, start_off, end_off, tokens, text_sha256, section FROM chunks "
    "WHERE doc_id IN (SELECT value FROM json_each(?)) AND waiting = 1 ORDER BY doc_id, idx")


class WaitingReads:
    """The reader's queries about chunks that wait for vectors (mixed into SqliteReader)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def waiting_count(self) -> int:
        """How many chunks wait for their vectors."""
        return int(self.query("SELECT count(*) FROM chunks WHERE waiting = 1")[0][0])

    def embed_backlog(self, limit: int, skip: Sequence[int] = ()) -> list[WaitingDoc]:
        """Up to `limit` documents whose chunks wait for vectors, the most recently changed
        first, leaving out the doc ids in `skip` (already on their way)."""
        heads = self.query(_WAITING_DOCS, (id_list(skip), limit))
        if not heads:
            return []
        return waiting_docs(heads, self.query(
            _WAITING_CHUNKS, (id_list([row[0] for row in heads]),)))

    def waiting_among(self, chunk_ids: Sequence[int]) -> set[int]:
        """Which of these chunks wait for their vectors."""
        if not chunk_ids:
            return set()
        return {int(r[0]) for r in self.query(
            "SELECT chunk_id FROM chunks WHERE waiting = 1 AND chunk_id IN "
            "(SELECT value FROM json_each(?))", (id_list(chunk_ids),))}
