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


class DocumentRow(msgspec.Struct, frozen=True):
    doc_id: int
    external_id: str
    source: str
    uri: str | None
    title: str
    library: str
    metadata: str
    content_sha256: str
    chunk_count: int
    created_at: str
    updated_at: str


_DOC_COLUMNS = ("doc_id, external_id, source, uri, title, library, metadata, content_sha256, "
                "chunk_count, created_at, updated_at")


class ChunkRow(msgspec.Struct, frozen=True):
    chunk_id: int
    doc_id: int
    idx: int
    start_off: int
    end_off: int
    text: str
    title: str
    external_id: str


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

    def search_vector(self, query: bytes, k: int,
                      doc_ids: Sequence[int] | None = None) -> list[VectorHit]:
        """The k nearest chunks, optionally only among `doc_ids` (filtered inside the KNN,
        so k results come back whenever k exist)."""
        where, args = "", [query, k]
        if doc_ids is not None:
            if not doc_ids:
                return []
            where = f" AND doc_id IN ({','.join('?' * len(doc_ids))})"
            args.extend(doc_ids)
        rows = self._rows(
            "WITH knn AS (SELECT chunk_id, doc_id, idx, start_off, end_off, text, distance "
            f"FROM vec_chunks WHERE embedding MATCH ? AND k = ?{where}) "
            "SELECT knn.*, d.external_id, d.uri, d.title, d.source FROM knn "
            "JOIN documents d ON d.doc_id = knn.doc_id ORDER BY knn.distance",
            args,
        )
        return [VectorHit(*row) for row in rows]

    def documents_page(self, after: int, limit: int) -> list[DocumentRow]:
        return [DocumentRow(*r) for r in self._rows(
            f"SELECT {_DOC_COLUMNS} FROM documents WHERE doc_id > ? ORDER BY doc_id LIMIT ?",
            (after, limit))]

    def document(self, doc_id: int) -> DocumentRow | None:
        rows = self._rows(f"SELECT {_DOC_COLUMNS} FROM documents WHERE doc_id = ?", (doc_id,))
        return DocumentRow(*rows[0]) if rows else None

    def content(self, doc_id: int) -> str | None:
        rows = self._rows("SELECT content FROM documents WHERE doc_id = ?", (doc_id,))
        return str(rows[0][0]) if rows else None

    def doc_ids_by_external(self, external_ids: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(external_ids), 500):
            part = list(external_ids[start:start + 500])
            marks = ",".join("?" * len(part))
            found.update(self._rows(
                f"SELECT external_id, doc_id FROM documents WHERE external_id IN ({marks})", part))
        return found

    def all_external_ids(self) -> list[tuple[int, str]]:
        return [(int(r[0]), str(r[1])) for r in self._rows(
            "SELECT doc_id, external_id FROM documents ORDER BY doc_id")]

    def chunk(self, chunk_id: int) -> ChunkRow | None:
        rows = self._rows(
            "SELECT v.chunk_id, v.doc_id, v.idx, v.start_off, v.end_off, v.text, d.title, "
            "d.external_id FROM vec_chunks v JOIN documents d ON d.doc_id = v.doc_id "
            "WHERE v.chunk_id = ?", (chunk_id,))
        return ChunkRow(*rows[0]) if rows else None
