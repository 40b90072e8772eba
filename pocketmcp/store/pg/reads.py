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
from pocketmcp.store.folder import SCAN_KEY
from pocketmcp.store.pg import connect, keywords, schema
from pocketmcp.store.pg.filters import POSTGRES
from pocketmcp.store.pg.target import PgTarget
from pocketmcp.store.reads import CommonReads, made
from pocketmcp.store.rows import Keywords

T = TypeVar("T")


def stored_vectors(rows: Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]],
                   text_shas: Iterable[str]) -> dict[str, F32]:
    """The stored vector of each chunk text among these digests that the index holds with
    one (its first chunk's, else one kept from a removed chunk): what the reader's
    vectors_for and the writer's reuse of known vectors both look up."""
    wanted = sorted(set(text_shas))
    if not wanted:
        return {}
    found = {str(sha): np.asarray(vec.to_numpy(), np.float32) for sha, vec in rows(
        "SELECT DISTINCT ON (text_sha256) text_sha256, embedding FROM chunks "
        "WHERE text_sha256 = ANY(%s) AND embedding IS NOT NULL "
        "ORDER BY text_sha256, chunk_id", (wanted,))}
    rest = [sha for sha in wanted if sha not in found]
    if rest:  # those of removed chunks, kept a while (store/writes.py)
        found.update((str(sha), np.asarray(vec.to_numpy(), np.float32)) for sha, vec in rows(
            "SELECT text_sha256, embedding FROM kept_vectors WHERE text_sha256 = ANY(%s)",
            (rest,)))
    return found


class PgReader(CommonReads):
    """One pooled connection (autocommit), one caller at a time (its reads alike on every
    store: store/reads.py)."""

    dialect = POSTGRES

    def __init__(self, conn: psycopg.Connection[Any], place: PgTarget) -> None:
        self._conn = conn
        self.place = place

    def _rows(self, sql: str, args: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql.encode(), args).fetchall()
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of a statement written in `?` style (store/reads.py)."""
        return self._rows(sql.replace("?", "%s"), args)

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
        rows = self.query("SELECT value FROM meta WHERE key = ?", (SCAN_KEY,))
        return not rows or rows[0][0] == "done"

    def vectors_for(self, text_shas: Iterable[str]) -> dict[str, bytes]:
        return {sha: vector.tobytes() for sha, vector in stored_vectors(
            self._rows, text_shas).items()}

    def keyword_stage(self, query: str, depth: int, allowed: Sequence[int] | None, *,
                      title_weight: float, total: int, documents: bool,
                      alone: bool = False, best_chunks: bool = False) -> Keywords:
        """Best chunks by BM25 (and with `documents`, best whole documents), as SQLite's
        FTS5 ranks them (store/pg/keywords.py), in one read snapshot; `total` is not needed
        (the server counts the chunks), `alone` changes nothing (the server runs the query),
        and `best_chunks` needs nothing more (the fusion takes each document's best)."""
        with self.snapshot():
            return keywords.keyword_stage(self._rows, query, depth, allowed,
                                          title_weight=title_weight, documents=documents,
                                          key=self.place.key())

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

    def mean_cosines(self, query: F32, doc_ids: Sequence[int]) -> dict[int, float]:
        """Each document's mean cosine to `query` over its chunks with vectors (exact: the
        documents' chunks are read by their index, not the HNSW graph)."""
        if not len(doc_ids):
            return {}
        try:
            rows = self._conn.execute(
                b"SELECT doc_id, avg(1 - (embedding <=> %s)) FROM chunks "
                b"WHERE doc_id = ANY(%s) AND embedding IS NOT NULL GROUP BY doc_id",
                (query, list(doc_ids))).fetchall()
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc
        return {int(d): float(c) for d, c in rows}

    def stored_vector(self, chunk_id: int, column: Any) -> bytes | None:
        """`column`: the chunk's embedding, None while it waits for it."""
        return None if column is None else np.asarray(column.to_numpy(), "<f4").tobytes()


def _alone(place: PgTarget, read: Callable[[psycopg.Connection[Any]], T]) -> T:
    """`read(conn)` on a connection of its own (blocking)."""
    conn = connect.connect(place, autocommit=True)
    try:
        return read(conn)
    except psycopg.Error as exc:
        raise connect.store_error(exc, place) from exc
    finally:
        conn.close()


def recorded_identity(place: PgTarget) -> Identity | None:
    """What the index records of its embeddings (blocking)."""
    return _alone(place, lambda conn: schema.stored_identity(conn, place))


def recorded_value(place: PgTarget, key: str) -> str | None:
    """The meta row `key` of the index (blocking)."""
    return _alone(place, lambda conn: schema.recorded_value(conn, place, key))


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
        return await made(lambda: self.run(lambda r: r.identity()), stopping)

    async def open_vectors(self) -> None:
        """Nothing to load: the server holds the vector index."""

    def nearest(self, reader: Reader, query: F32, k: int, candidates: int,
                allowed: Sequence[int] | None) -> Found:
        assert isinstance(reader, PgReader)
        return reader.nearest(query, k, allowed)

    def mean_cosines(self, reader: Reader, query: F32, doc_ids: Sequence[int]
                     ) -> dict[int, float]:
        assert isinstance(reader, PgReader)
        return reader.mean_cosines(query, doc_ids)

    def close(self) -> None:
        self._pool.close()
