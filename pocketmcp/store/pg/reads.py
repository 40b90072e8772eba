"""Reading a Postgres index: pooled connections lent to blocking functions in worker
threads, as SQLite's readers are. Readers never block writers (MVCC): each statement sees
what was committed when it started, a `snapshot` one state throughout."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import numpy as np
import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from pocketmcp.core.identity import Identity
from pocketmcp.errors import StoreError
from pocketmcp.store.api import F32, Found, Reader, Vectors
from pocketmcp.store.archive import StoredDoc
from pocketmcp.store.filters import DocFilter
from pocketmcp.store.pg import archive, connect, filters, keywords, schema
from pocketmcp.store.pg.target import PgTarget
from pocketmcp.store.related import MAX_INCOMING, Linker, LinkRow
from pocketmcp.store.rows import (
    ChunkRow,
    DocState,
    DocumentRow,
    HitRow,
    Keywords,
    Sort,
    WaitingDoc,
    waiting_docs,
)

T = TypeVar("T")

_CHUNK_TEXT = "substr(d.content, c.start_off + 1, c.end_off - c.start_off)"
_HIT_DOC = ("d.external_id, d.uri, d.title, d.source, c.section, d.library, d.size_bytes, "
            "d.mtime_ns, d.created, d.modified, d.updated_at, d.tags::text")
_DOC_COLUMNS = ("d.doc_id, d.external_id, d.source, d.uri, d.title, d.library, "
                "d.metadata::text, d.content_sha256, d.chunk_count, d.created_at, "
                "d.updated_at, d.properties::text, d.tags::text, d.created, d.modified, "
                "d.size_bytes, d.mtime_ns")


def stored_vectors(rows: Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]],
                   text_shas: Iterable[str]) -> dict[str, F32]:
    """The stored vector of each chunk text among these digests that the index holds with
    one (its first chunk's): what the reader's vectors_for and the writer's reuse of known
    vectors both look up."""
    wanted = sorted(set(text_shas))
    if not wanted:
        return {}
    return {str(sha): np.asarray(vec.to_numpy(), np.float32) for sha, vec in rows(
        "SELECT DISTINCT ON (text_sha256) text_sha256, embedding FROM chunks "
        "WHERE text_sha256 = ANY(%s) AND embedding IS NOT NULL "
        "ORDER BY text_sha256, chunk_id", (wanted,))}


class PgReader:
    """One pooled connection (autocommit), one caller at a time."""

    def __init__(self, conn: psycopg.Connection[Any], place: PgTarget) -> None:
        self._conn = conn
        self.place = place

    def _rows(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql.encode(), args).fetchall()
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every query inside sees the same committed state."""
        try:
            self._conn.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc
        try:
            yield
        finally:
            self._conn.execute(b"COMMIT")

    def identity(self) -> Identity | None:
        try:
            return schema.stored_identity(self._conn, self.place)
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc

    def scan_done(self) -> bool:
        """As the SQLite store's: no record (an index made before it was kept) counts as done."""
        rows = self._rows("SELECT value FROM meta WHERE key = 'first_scan'")
        return not rows or rows[0][0] == "done"

    def counts(self) -> dict[str, int]:
        docs = self._rows("SELECT count(*), coalesce(sum(chunk_count), 0) FROM documents")[0]
        return {"documents": int(docs[0]), "chunks": int(docs[1]),
                "waiting": self.waiting_count()}

    def waiting_count(self) -> int:
        return int(self._rows("SELECT count(*) FROM chunks WHERE embedding IS NULL")[0][0])

    def embed_backlog(self, limit: int, skip: Sequence[int] = ()) -> list[WaitingDoc]:
        """As the SQLite store's: documents whose chunks wait for vectors, newest first."""
        heads = self._rows(
            "SELECT q.doc_id, d.external_id, d.content_sha256, d.content "
            "FROM embed_queue q JOIN documents d ON d.doc_id = q.doc_id "
            "WHERE NOT (q.doc_id = ANY(%s)) ORDER BY q.rank DESC, q.doc_id DESC LIMIT %s",
            (list(skip), limit))
        if not heads:
            return []
        return waiting_docs(heads, self._rows(
            "SELECT doc_id, idx, start_off, end_off, tokens, text_sha256, section FROM chunks "
            "WHERE doc_id = ANY(%s) AND embedding IS NULL ORDER BY doc_id, idx",
            ([row[0] for row in heads],)))

    def waiting_among(self, chunk_ids: Sequence[int]) -> set[int]:
        if not chunk_ids:
            return set()
        return {int(r[0]) for r in self._rows(
            "SELECT chunk_id FROM chunks WHERE chunk_id = ANY(%s) AND embedding IS NULL",
            (list(chunk_ids),))}

    def doc_state(self, external_id: str) -> DocState | None:
        rows = self._rows("SELECT content_sha256, size_bytes, mtime_ns, library FROM documents "
                          "WHERE external_id = %s", (external_id,))
        return DocState(str(rows[0][0]), rows[0][1], rows[0][2], rows[0][3]) if rows else None

    def vectors_for(self, text_shas: Iterable[str]) -> dict[str, bytes]:
        return {sha: vector.tobytes() for sha, vector in stored_vectors(
            self._rows, text_shas).items()}

    def external_ids(self, prefix: str, after: str = "", limit: int = 500) -> list[str]:
        low = max(prefix, after)
        high = prefix + "\U0010ffff"
        return [r[0] for r in self._rows(
            "SELECT external_id FROM documents WHERE external_id >= %s AND external_id > %s "
            "AND external_id < %s ORDER BY external_id LIMIT %s", (prefix, low, high, limit))]

    def keyword_stage(self, query: str, depth: int, allowed: Sequence[int] | None, *,
                      title_weight: float, total: int, documents: bool,
                      alone: bool = False) -> Keywords:
        """Best chunks (and with `documents`, best whole documents by BM25, as SQLite's)
        by Postgres full-text search (store/pg/keywords.py), in one read snapshot; `total`
        is not needed (the server counts the chunks), and `alone` changes nothing (the
        server runs the query)."""
        if not documents:
            return keywords.keyword_stage(self._rows, query, depth, allowed,
                                          title_weight=title_weight)
        with self.snapshot():
            return keywords.keyword_stage(self._rows, query, depth, allowed,
                                          title_weight=title_weight, documents=True,
                                          key=self.place.key())

    def hits(self, chunk_ids: Sequence[int]) -> dict[int, HitRow]:
        if not chunk_ids:
            return {}
        return {int(r[0]): HitRow(*r) for r in self._rows(
            "SELECT c.chunk_id, c.doc_id, c.idx, c.start_off, c.end_off, "
            f"{_CHUNK_TEXT}, {_HIT_DOC} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.chunk_id = ANY(%s)", (list(chunk_ids),))}

    def neighbours(self, doc_id: int, first: int, last: int) -> list[tuple[int, int, int, str]]:
        return [(int(a), int(b), int(c), str(d)) for a, b, c, d in self._rows(
            f"SELECT c.idx, c.start_off, c.end_off, {_CHUNK_TEXT} FROM chunks c "
            "JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.doc_id = %s AND c.idx BETWEEN %s AND %s ORDER BY c.idx",
            (doc_id, first, min(last, 2**31 - 1)))]

    def vectors_by_ids(self, ids: Sequence[int], dim: int) -> Vectors:
        rows = self._rows("SELECT chunk_id, doc_id, embedding FROM chunks "
                          "WHERE chunk_id = ANY(%s) AND embedding IS NOT NULL "
                          "ORDER BY chunk_id", (sorted(set(ids)),))
        vectors = np.zeros((len(rows), dim), np.float32)
        for i, row in enumerate(rows):
            vectors[i] = row[2].to_numpy()
        return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows],
                                                                   np.int64), vectors)

    def nearest(self, query: F32, k: int, allowed: Sequence[int] | None) -> Found:
        """The k nearest chunks by HNSW (cosine), visiting the place's `ef_search`
        candidates (at least k; pgvector's default, 40, finds too few of the truly nearest:
        README, Postgres); with `allowed`, an iterative scan keeps going until k of those
        documents' chunks are found."""
        if allowed is not None and not allowed:
            return (np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64))
        # Chunks waiting for their vectors (NULL) are not in the HNSW index; a plan that
        # scans the table instead must leave them out too.
        where, args = ("WHERE embedding IS NOT NULL", []) if allowed is None else (
            "WHERE embedding IS NOT NULL AND doc_id = ANY(%s)", [list(allowed)])
        try:
            with self._conn.transaction():
                self._conn.execute(b"SELECT set_config('hnsw.ef_search', %s, true)",
                                   (str(min(1000, max(self.place.ef_search, k))),))
                if allowed is not None:
                    self._conn.execute(b"SET LOCAL hnsw.iterative_scan = relaxed_order")
                rows = self._conn.execute(
                    f"SELECT chunk_id, 1 - (embedding <=> %s) AS cos, doc_id FROM chunks {where} "
                    "ORDER BY embedding <=> %s LIMIT %s".encode(),
                    (query, *args, query, k)).fetchall()
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc
        rows.sort(key=lambda r: (-r[1], r[0]))  # relaxed order: nearly sorted
        return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows],
                                                                   np.float32),
                np.array([r[2] for r in rows], np.int64))

    def documents_page(self, where: DocFilter, limit: int, *, sort: Sort = "doc_id",
                       after: tuple[str, int] | None = None) -> list[DocumentRow]:
        conditions, args = filters.where(where)
        if sort == "path":
            if after is not None:
                conditions += " AND d.external_id > %s"
                args.append(after[0])
            order = "d.external_id"
        elif sort == "modified":
            if after is not None:
                conditions += " AND (d.modified < %s OR (d.modified = %s AND d.doc_id < %s))"
                args += [after[0], after[0], after[1]]
            order = "d.modified DESC NULLS LAST, d.doc_id DESC"
        else:
            if after is not None:
                conditions += " AND d.doc_id > %s"
                args.append(after[1])
            order = "d.doc_id"
        return [DocumentRow(*r) for r in self._rows(
            f"SELECT {_DOC_COLUMNS} FROM documents d WHERE true{conditions} ORDER BY {order} "
            "LIMIT %s", (*args, limit))]

    def doc_ids_where(self, where: DocFilter) -> list[int]:
        conditions, args = filters.where(where)
        return [int(r[0]) for r in self._rows(
            f"SELECT d.doc_id FROM documents d WHERE true{conditions} ORDER BY d.doc_id", args)]

    def libraries(self) -> list[tuple[str, int, int]]:
        return [(str(r[0]), int(r[1]), int(r[2])) for r in self._rows(
            "SELECT library, count(*), coalesce(sum(chunk_count), 0) FROM documents "
            "GROUP BY library ORDER BY library COLLATE \"C\"")]

    def document(self, doc_id: int) -> DocumentRow | None:
        rows = self._rows(f"SELECT {_DOC_COLUMNS} FROM documents d WHERE doc_id = %s",
                          (doc_id,))
        return DocumentRow(*rows[0]) if rows else None

    def document_by_external(self, external_id: str) -> DocumentRow | None:
        rows = self._rows(f"SELECT {_DOC_COLUMNS} FROM documents d WHERE external_id = %s",
                          (external_id,))
        return DocumentRow(*rows[0]) if rows else None

    def content(self, doc_id: int) -> str | None:
        rows = self._rows("SELECT content FROM documents WHERE doc_id = %s", (doc_id,))
        return str(rows[0][0]) if rows else None

    def all_external_ids(self) -> list[tuple[int, str]]:
        return [(int(r[0]), str(r[1])) for r in self._rows(
            "SELECT doc_id, external_id FROM documents ORDER BY doc_id")]

    def chunk(self, chunk_id: int) -> ChunkRow | None:
        rows = self._rows(
            f"SELECT c.chunk_id, c.doc_id, c.idx, c.start_off, c.end_off, {_CHUNK_TEXT}, "
            "d.title, d.external_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
            "WHERE c.chunk_id = %s", (chunk_id,))
        return ChunkRow(*rows[0]) if rows else None


    def stored_documents(self) -> Iterator[StoredDoc]:
        """Every document with its chunks, vectors and links (store/pg/archive.py)."""
        return archive.documents(self._rows)

    def outgoing_links(self, doc_id: int) -> list[LinkRow]:
        """As the SQLite store's (store/sqlite/queries.py)."""
        return [LinkRow(*r) for r in self._rows(
            "SELECT l.idx, l.target, l.kind, d.doc_id, d.title, d.external_id, d.source "
            "FROM links l LEFT JOIN doc_keys k ON k.key = l.key "
            "LEFT JOIN documents d ON d.doc_id = k.doc_id "
            "WHERE l.doc_id = %s ORDER BY l.idx, d.doc_id", (doc_id,))]

    def incoming_links(self, doc_id: int, limit: int = MAX_INCOMING) -> list[Linker]:
        return [Linker(*r) for r in self._rows(
            "SELECT DISTINCT d.doc_id, d.title, d.external_id, d.source FROM doc_keys k "
            "JOIN links l ON l.key = k.key JOIN documents d ON d.doc_id = l.doc_id "
            "WHERE k.doc_id = %s AND l.doc_id != %s ORDER BY d.doc_id LIMIT %s",
            (doc_id, doc_id, limit))]


def recorded_identity(place: PgTarget) -> Identity | None:
    """What the index records of its embeddings (blocking; one connection of its own)."""
    conn = connect.connect(place, autocommit=True)
    try:
        return schema.stored_identity(conn, place)
    except psycopg.Error as exc:
        raise connect.store_error(exc, place) from exc
    finally:
        conn.close()


def recorded_value(place: PgTarget, key: str) -> str | None:
    """The meta row `key` of the index (blocking; one connection of its own)."""
    conn = connect.connect(place, autocommit=True)
    try:
        return schema.recorded_value(conn, place, key)
    except psycopg.Error as exc:
        raise connect.store_error(exc, place) from exc
    finally:
        conn.close()


class PgIndex:
    """One Postgres index (a schema) as searches and listings see it."""

    def __init__(self, place: PgTarget, dim: int, readers: int = 4, *,
                 root: Path | None = None) -> None:
        self.place = place
        self.dim = dim
        self.root = root
        self._pool = ConnectionPool(
            place.url.reveal(), min_size=0, max_size=readers, open=False, timeout=30.0,
            kwargs={"autocommit": True, "options": connect.options(place)},
            name=f"pocketmcp.{place.schema}")
        # Connections with pgvector's types registered (a reader may connect before a writer
        # has created the extension: those register on a later use).
        self._typed: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()

    def _typed_conn(self, conn: psycopg.Connection[Any]) -> None:
        if conn not in self._typed:
            try:
                connect.configure(conn)
                self._typed.add(conn)
            except psycopg.ProgrammingError:
                pass

    @property
    def where(self) -> str:
        return self.place.describe()

    def beside(self, name: str) -> Path:
        return self.place.beside(name)

    @property
    def live(self) -> int:
        return 0  # pgvector's HNSW sizes its own candidate list (hnsw.ef_search)

    @property
    def vectors_from(self) -> str:
        return "pgvector hnsw"

    def call(self, fn: Callable[[Reader], T]) -> T:
        """`fn(reader)` on a free connection, here (blocking)."""
        try:
            self._pool.open(wait=False)
            with self._pool.connection() as conn:
                self._typed_conn(conn)
                return fn(PgReader(conn, self.place))
        except PoolTimeout as exc:
            raise StoreError(f"{self.where}: no connection to the Postgres server within "
                             "30 s") from exc
        except psycopg.Error as exc:  # raised outside the reader's own statements
            raise connect.store_error(exc, self.place) from exc

    async def run(self, fn: Callable[[Reader], T]) -> T:
        return await anyio.to_thread.run_sync(self.call, fn)

    async def made(self, stopping: anyio.Event) -> Identity | None:
        while not stopping.is_set():
            stored = await self.run(lambda r: r.identity())
            if stored is not None:
                return stored
            with anyio.move_on_after(0.2):
                await stopping.wait()
        return None

    async def open_vectors(self) -> None:
        """Nothing to load: the server holds the vector index."""

    def nearest(self, reader: Reader, query: F32, k: int, candidates: int,
                allowed: Sequence[int] | None) -> Found:
        assert isinstance(reader, PgReader)
        return reader.nearest(query, k, allowed)

    def close(self) -> None:
        self._pool.close()
