"""Read-only access to an index. Safe to use while the writer writes (WAL)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from pocketmcp.errors import StoreError
from pocketmcp.store import schema
from pocketmcp.store.connect import open_sync_reader, sqlite_errors


class VectorHit(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    idx: int
    start_off: int
    end_off: int
    text: str
    distance: float
    external_id: str
    uri: str | None
    title: str
    source: str


class IndexReader:
    """One read-only connection. Not thread-safe: one caller at a time."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._conn = open_sync_reader(db_path)

    def close(self) -> None:
        self._conn.close()

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return list(self._conn.execute(sql, args).fetchall())
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def model(self) -> tuple[str, int] | None:
        try:
            return schema.stored_model(self._conn)
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def doc_state(self, external_id: str) -> tuple[str, int | None, int | None] | None:
        """(content sha256, size, mtime_ns) of a document, or None."""
        rows = self._rows("SELECT content_sha256, size_bytes, mtime_ns FROM documents "
                          "WHERE external_id = ?", (external_id,))
        return (str(rows[0][0]), rows[0][1], rows[0][2]) if rows else None

    def vectors_for(self, text_shas: Iterable[str]) -> dict[str, bytes]:
        """Stored vectors of chunks whose text has one of these digests."""
        wanted = sorted(set(text_shas))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            marks = ",".join("?" * len(part))
            for sha, vector in self._rows(
                f"SELECT c.text_sha256, v.embedding FROM chunks c "
                f"JOIN vec_chunks v ON v.chunk_id = c.chunk_id "
                f"WHERE c.text_sha256 IN ({marks})", part,
            ):
                found.setdefault(sha, bytes(vector))
        return found

    def external_ids(self, prefix: str, after: str = "", limit: int = 500) -> list[str]:
        """A page of external ids that start with `prefix`, in order, after `after`."""
        low = max(prefix, after)
        high = prefix + "\U0010ffff"
        return [r[0] for r in self._rows(
            "SELECT external_id FROM documents WHERE external_id >= ? AND external_id > ? "
            "AND external_id < ? ORDER BY external_id LIMIT ?", (prefix, low, high, limit))]

    def counts(self) -> dict[str, int]:
        docs = self._rows("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents")[0]
        return {"documents": int(docs[0]), "chunks": int(docs[1])}

    def search_vector(self, query: bytes, k: int) -> list[VectorHit]:
        rows = self._rows(
            "WITH knn AS (SELECT chunk_id, doc_id, idx, start_off, end_off, text, distance "
            "FROM vec_chunks WHERE embedding MATCH ? AND k = ?) "
            "SELECT knn.*, d.external_id, d.uri, d.title, d.source FROM knn "
            "JOIN documents d ON d.doc_id = knn.doc_id ORDER BY knn.distance",
            (query, k),
        )
        return [VectorHit(*row) for row in rows]
