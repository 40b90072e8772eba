"""Read-only access to an index. Safe to use while the writer writes (WAL)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pocketmcp.core.identity import Identity
from pocketmcp.errors import StoreError
from pocketmcp.store.reads import HIT_DOC, CommonReads
from pocketmcp.store.rows import Keywords, VectorHit
from pocketmcp.store.sqlite import halves, schema
from pocketmcp.store.sqlite.connect import id_list, open_sync_reader, sqlite_errors
from pocketmcp.store.sqlite.filters import SQLITE
from pocketmcp.store.sqlite.keywords import bm25, textsearch
from pocketmcp.store.sqlite.keywords.lengths import ChunkLengths, averages
from pocketmcp.store.sqlite.keywords.textsearch import TermCounts
from pocketmcp.store.sqlite.log import TOKEN_KEY, ChunkLog, Vectors, stored_vectors
from pocketmcp.store.sqlite.threads import Threads

READ_MAP_BYTES = 1 << 36  # how much of the index file readers map (all of it, in practice)


class SqliteReader(CommonReads):
    """One read-only connection (its reads alike on every store: store/reads.py). Not
    thread-safe: one caller at a time. `helpers`: threads its index lends it for large
    chunk queries in two halves (without them, those run whole)."""

    def __init__(self, db_path: Path, terms: TermCounts | None = None,
                 lengths: ChunkLengths | None = None, *,
                 helpers: Threads | None = None) -> None:
        self.db_path = db_path
        self._conn = open_sync_reader(db_path)
        try:
            # Pages read straight from the OS's page cache, not copied into the connection's
            # own 2 MB cache first: a BM25 query at 1M chunks reads several MB of posting
            # lists (25% faster p50, bench/search_compare.py). The writer never shrinks the
            # file, so nothing mapped goes away under a reader.
            self._conn.execute(f"PRAGMA mmap_size = {READ_MAP_BYTES}")
        except sqlite_errors() as exc:
            self._conn.close()
            raise StoreError(f"{db_path}: {exc}") from exc
        self.log = ChunkLog(self._conn, db_path)
        self._terms = terms or TermCounts()  # a pool's connections share theirs
        self._lengths = lengths or ChunkLengths()  # these too (closed by the pool)
        self._own_lengths = lengths is None  # made here: closed here
        self._helpers = helpers
        self._second: Any = None  # a second connection for split FTS5 queries, once needed

    def close(self) -> None:
        self._conn.close()
        if self._second is not None:
            self._second.close()
        if self._own_lengths:
            self._lengths.close()  # its read in the background stops

    dialect = SQLITE

    def _second_connection(self) -> Any:
        if self._second is None:
            self._second = halves.second_connection(self.db_path, READ_MAP_BYTES)
        return self._second

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return list(self._conn.execute(sql, args).fetchall())
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of a read-only query (for the store's other reading modules)."""
        return self._rows(sql, args)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: every query inside sees the same committed state (inside
        another snapshot, that one's)."""
        if self._conn.in_transaction:
            yield
            return
        try:
            self._conn.execute("BEGIN")
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    def identity(self) -> Identity | None:
        """The provider, model, dimension and prefixes the index records."""
        try:
            return schema.stored_identity(self._conn)
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def scan_done(self) -> bool:
        """Whether the writer holding the lock has finished its first scan of the folder
        (the index records it; an index with no schema yet has not)."""
        try:
            return schema.scan_recorded(self._conn)
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def vectors_for(self, text_shas: Iterable[str]) -> dict[str, bytes]:
        """Stored vectors of chunks whose text has one of these digests."""
        return stored_vectors(self._rows, text_shas)

    def search_vector(self, query: bytes, k: int,
                      doc_ids: Sequence[int] | None = None) -> list[VectorHit]:
        """Exact k nearest chunks by sqlite-vec's own scan, optionally only among `doc_ids`
        (filtered inside the KNN). Search uses the vector file; this is the reference
        it can be checked against."""
        where, args = "", [query, k]
        if doc_ids is not None:
            if not doc_ids:
                return []
            where = f" AND doc_id IN ({','.join('?' * len(doc_ids))})"
            args.extend(doc_ids)
        rows = self._rows(
            "WITH knn AS (SELECT chunk_id, doc_id, idx, start_off, end_off, text, distance "
            f"FROM vec_chunks WHERE embedding MATCH ? AND k = ?{where}) "
            "SELECT knn.chunk_id, knn.doc_id, knn.idx, knn.start_off, knn.end_off, knn.text, "
            f"{HIT_DOC.format(j='')}, knn.distance "
            "FROM knn "
            "JOIN documents d ON d.doc_id = knn.doc_id "
            "JOIN chunks c ON c.chunk_id = knn.chunk_id ORDER BY knn.distance",
            args,
        )
        return [VectorHit(*row) for row in rows]

    def term_docs(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each (stemmed) term; for "x*", the sum over terms starting
        with x (the postings a prefix query reads; at least the chunks it matches). Terms no
        chunk holds are left out. Remembered until the next commit that changes chunks."""
        # One read: the counts belong to the state they are remembered under.
        with self.snapshot():
            try:  # the state: which database, its schema, and its last chunk change
                state = self._conn.execute(
                    "SELECT (SELECT value FROM meta WHERE key = ?), (SELECT schema_version "
                    "FROM pragma_schema_version), (SELECT seq FROM sqlite_sequence WHERE "
                    "name = 'chunk_log'), (SELECT seq FROM sqlite_sequence WHERE name = "
                    "'chunks')", (TOKEN_KEY,)).fetchone()  # chunks: keyword-only ones too
            except sqlite_errors():  # an index not made (or migrated) yet: not remembered
                return self._count_terms(terms)
            return self._terms.get(tuple(state), terms, self._count_terms)

    def _count_terms(self, terms: Sequence[str]) -> dict[str, int]:
        # One term at a time: fts5vocab seeks a single term but walks its whole vocabulary
        # for an IN list (8 ms against 0.6 ms at 50k chunks).
        found: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            if term.endswith("*"):
                prefix = term[:-1]
                rows = self._rows("SELECT sum(doc) FROM chunks_vocab WHERE term >= ? AND "
                                  "term <= ?", (prefix, prefix + "\U0010ffff"))
            else:
                rows = self._rows("SELECT doc FROM chunks_vocab WHERE term = ?", (term,))
            if rows and rows[0][0] is not None:
                found[term] = int(rows[0][0])
        return found

    def keyword_stage(self, query: str, depth: int, allowed: Sequence[int] | None, *,
                      title_weight: float, total: int, documents: bool,
                      alone: bool = False, best_chunks: bool = False) -> Keywords:
        """Best chunks for the query's words (textsearch.py), in one read snapshot; their
        scores are FTS5's BM25, so `best_chunks` needs nothing more (the fusion takes each
        document's best). The words are weighed against FTS5's own count of chunks, read in
        that snapshot: the
        `total` given (the vector file's count as of its last sync, which a process that has
        just indexed may not have made yet) only when FTS5 has none. `alone`: nothing else
        of the search runs meanwhile, so a large chunk query may take a second core."""
        with self.snapshot():
            rows = self.fts_rows()
            return textsearch.keyword_stage(self, query, depth, allowed,
                                            title_weight=title_weight,
                                            total=total if rows is None else rows,
                                            documents=documents, alone=alone)

    def fts_rows(self) -> int | None:
        """The chunks FTS5 holds, from its averages record (the count its BM25 uses)."""
        rows = self._rows("SELECT block FROM chunks_fts_data WHERE id = 1")
        return averages(bytes(rows[0][0]))[0] if rows and rows[0][0] else None

    def search_keyword(self, match: str, k: int, doc_ids: Sequence[int] | None = None,
                       title_weight: float = 1.0, postings: int = 0,
                       words: Sequence[str] = ()) -> list[tuple[int, float, int]]:
        """BM25 over chunk text and document title: (chunk_id, score, doc_id), best first
        (ties by chunk id). `words`: the plain words `match` is any of, when it is only that;
        such a query over every chunk is scored in numpy (bm25.py), the same scores. Else
        FTS5 runs it; `postings`, the chunks holding the words (summed), decides whether it
        runs in two halves at once (halves.py; when the reader has helpers)."""
        if words and doc_ids is None:
            with self.snapshot():
                best = bm25.best_chunks(self._conn, self.db_path, self._lengths, self.log,
                                        words, k, title_weight)
            if best is not None:
                return best
        where, args = "", [title_weight, match]
        if doc_ids is not None:
            if not doc_ids:
                return []
            # `+` keeps the condition out of FTS5, which would otherwise look up every
            # allowed rowid on its own (500 times slower at 1% of 50,000 chunks): the MATCH
            # runs once and its rows are checked against the allowed set.
            where = (" AND +f.rowid IN (SELECT chunk_id FROM chunks WHERE doc_id IN "
                     "(SELECT value FROM json_each(?)))")
            args.append(id_list(doc_ids))
        elif postings >= halves.SPLIT_POSTINGS and self._helpers is not None:
            # Two lookups at the ends of the table (one min() and max() together scans it).
            (low, high), = self._rows("SELECT (SELECT min(chunk_id) FROM chunks), "
                                      "(SELECT max(chunk_id) FROM chunks)")
            if low is not None and high > low:
                return halves.split_rows(self._conn, self._second_connection(), self.db_path,
                                         args, k, (low + high + 1) // 2, self._helpers)
        return halves.chunk_rows(self._conn, self.db_path, where, [*args, k])

    def search_documents(self, match: str, k: int, doc_ids: Sequence[int] | None = None,
                         title_weight: float = 1.0) -> list[tuple[int, float]]:
        """BM25 over whole documents: (doc_id, score), best first."""
        where, args = "", [title_weight, match]
        if doc_ids is not None:
            if not doc_ids:
                return []
            where = " AND +rowid IN (SELECT value FROM json_each(?))"  # as search_keyword
            args.append(id_list(doc_ids))
        args.append(k)
        return [(int(r[0]), float(r[1])) for r in self._rows(
            "SELECT rowid, -bm25(documents_fts, ?, 1.0) AS score FROM documents_fts "
            f"WHERE documents_fts MATCH ?{where} ORDER BY score DESC LIMIT ?", args)]

    def first_chunks(self, doc_ids: Sequence[int]) -> dict[int, int]:
        """Each document's first chunk id."""
        marks = ",".join("?" * len(doc_ids))
        return {int(d): int(c) for d, c in self._rows(
            f"SELECT doc_id, chunk_id FROM chunks WHERE idx = 0 AND doc_id IN ({marks})",
            list(doc_ids))} if doc_ids else {}

    def vectors_by_ids(self, ids: Sequence[int], dim: int) -> Vectors:
        """(chunk ids, doc ids, float32 vectors) of the chunks that still exist, by id."""
        return self.log.vectors_by_ids(ids, dim)

    def stored_vector(self, chunk_id: int, column: Any) -> bytes | None:
        """`column`: whether the chunk waits (written for keywords, its vector to come)."""
        if column:
            return None
        found = self._rows("SELECT embedding FROM vec_chunks WHERE chunk_id = ?", (chunk_id,))
        if not found:
            raise StoreError(f"{self.db_path}: chunk {chunk_id} has no vector")
        return bytes(found[0][0])
