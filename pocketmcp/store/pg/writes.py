"""Writing a Postgres index: the writer actor's transactions, safe beside other processes'.

Every process may run a writer actor on one index. Each batch is one READ COMMITTED
transaction that first takes a transaction-scoped advisory lock per document it writes, in
sorted order (so two writers of the same documents queue rather than deadlock), then reads
and writes those documents' rows: two processes indexing one shared folder never duplicate
or lose a document. A serialization failure, a deadlock, a lock timeout or a dropped
connection rolls the whole batch back and runs it again (a few times, with jittered
backoff). Text cannot hold NUL in Postgres: NUL characters become U+FFFD, so that every
character offset still holds.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg

from pocketmcp import logs
from pocketmcp.core.identity import Identity
from pocketmcp.core.notes import doc_keys
from pocketmcp.errors import StoreError
from pocketmcp.messages import Chunk, DocFacts, DocRecord, Written
from pocketmcp.store import facts, lines
from pocketmcp.store.pg import connect, schema, tokens
from pocketmcp.store.pg.reads import PgIndex, stored_vectors
from pocketmcp.store.pg.target import PgTarget
from pocketmcp.store.writes import CommonWrites, check_vectors, now, without_successor

T = TypeVar("T")
log = logs.get("pocketmcp.store.pg")

LOCK_DOCUMENT = 7402  # advisory lock namespace: one document, by external id
ATTEMPTS = 6  # runs of one batch before its failure is final
BACKOFF_S = 0.05  # first wait before a retry; doubles, with jitter


class _Retry(Exception):
    """A transient failure inside a batch: roll it back and run it again."""


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")


class PgWriter(CommonWrites):
    """One process's writing connection to a Postgres index (its writes alike on every
    store: store/writes.py)."""

    def __init__(self, place: PgTarget, identity: Identity, *, rebuild: bool = False) -> None:
        self.place = place
        self.identity = identity
        self.dim = identity.dim
        self._commits = 0
        self._conn = connect.connect(place, autocommit=True)
        try:
            connect.ensure_extension(self._conn)
            connect.configure(self._conn)
            schema.migrate(self._conn, place, identity, rebuild=rebuild)
        except psycopg.Error as exc:
            self._conn.close()
            raise connect.store_error(exc, place) from exc
        except BaseException:
            self._conn.close()
            raise

    @property
    def where(self) -> str:
        return self.place.describe()

    @property
    def commits(self) -> int:
        return self._commits

    @property
    def wants_repair(self) -> bool:
        return False  # the server keeps its own vector index

    def repair_vectors(self) -> None:
        return None

    def stop_repair(self) -> None:
        return None

    def view(self) -> PgIndex:
        return PgIndex(self.place, self.dim, readers=1)

    def close(self) -> None:
        self._conn.close()

    # -- transactions -------------------------------------------------------------------------

    def batch(self, work: Callable[[], T], keys: Sequence[str]) -> T:
        delay = BACKOFF_S
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with self._conn.transaction():
                    for key in sorted(set(keys)):
                        self._sql("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                                  (LOCK_DOCUMENT, key))
                    self._kept = 0
                    result = work()
                    self.bound_kept()
                self._commits += 1
                return result
            except (_Retry, psycopg.Error) as exc:
                cause = exc.__cause__ if isinstance(exc, _Retry) else exc
                if isinstance(exc, psycopg.Error) and not connect.is_transient(exc):
                    raise connect.store_error(exc, self.place) from exc
                if attempt == ATTEMPTS:
                    raise StoreError(f"{self.where}: the write failed {ATTEMPTS} times: "
                                     f"{type(cause).__name__}") from exc
                log.warning("write_retry", index=self.where, attempt=attempt,
                            error=type(cause).__name__)
                time.sleep(delay * (0.5 + random.random()))
                delay *= 2
                if self._conn.closed or self._conn.broken:
                    self._reconnect()
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        try:
            self._conn.close()
        finally:
            self._conn = connect.connect(self.place, autocommit=True)
            connect.configure(self._conn)

    @contextmanager
    def item(self) -> Iterator[None]:
        """A savepoint: an error inside undoes this item only (a transient one, the batch)."""
        try:
            with self._conn.transaction():
                yield
        except psycopg.Error as exc:
            if connect.is_transient(exc):
                raise _Retry() from exc
            raise connect.store_error(exc, self.place) from exc

    def _sql(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql.encode(), args)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._sql(sql.replace("?", "%s"), args)

    # -- writes (inside `batch`) ----------------------------------------------------------------

    def record(self, key: str, value: str) -> None:
        """Outside a batch it commits at once (autocommit)."""
        try:
            self._sql("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) "
                      "DO UPDATE SET value = excluded.value", (key, value))
        except psycopg.Error as exc:
            raise connect.store_error(exc, self.place) from exc

    def upsert(self, doc: DocRecord, chunks: Sequence[Chunk], vectors: bytes | None, *,
               rank: int = 0) -> Written:
        """As the SQLite store's: a document whose text, title, library and metadata are
        unchanged keeps its chunks; only its stat, and its facts when they changed. Without
        `vectors`, its chunks wait for theirs, queued at `rank`."""
        if vectors is not None:
            check_vectors(doc.external_id, len(chunks), vectors, self.dim)
        row = self._sql("SELECT doc_id, content_sha256, title, library, metadata, created, "
                        "properties, tags, modified FROM documents WHERE external_id = %s "
                        "FOR UPDATE", (doc.external_id,)).fetchone()
        at = now()
        metadata = json.loads(json.dumps(doc.metadata, ensure_ascii=False))
        content = _text(doc.content)
        if row is not None and (row[1], row[2], row[3], row[4]) == (
                doc.sha256, doc.title, doc.library, metadata):
            self._sql("UPDATE documents SET size_bytes = %s, mtime_ns = %s WHERE doc_id = %s",
                      (doc.size_bytes, doc.mtime_ns, row[0]))
            kept = facts.with_dates(doc.facts, row[8] or at, row[5])
            links = self._sql("SELECT target, key, kind FROM links WHERE doc_id = %s "
                              "ORDER BY idx", (row[0],)).fetchall()
            have = (json.dumps(row[6], ensure_ascii=False, sort_keys=True),
                    json.dumps(row[7], ensure_ascii=False), row[5], row[8],
                    json.dumps([list(r) for r in links], ensure_ascii=False))
            if facts.stored(kept, doc.metadata) == have:
                return Written(row[0], "unchanged", len(chunks), 0)
            self._write_facts(row[0], doc, kept)
            self._sql("UPDATE documents SET updated_at = %s WHERE doc_id = %s", (at, row[0]))
            return Written(row[0], "updated", len(chunks), 0)
        removed = 0
        meta_json = json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True)
        # Without vectors, those of text the index holds already (the document's old
        # version, before it goes) are taken at once: only the rest wait.
        rows: list[Any] = list(np.frombuffer(vectors, np.float32).reshape(
            len(chunks), self.dim)) if vectors is not None else self._known(chunks)
        if row is None:
            doc_id = self._sql(
                "INSERT INTO documents(external_id, source, uri, title, library, metadata, "
                "content, content_sha256, size_bytes, mtime_ns, chunk_count, created_at, "
                "updated_at) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s) "
                "RETURNING doc_id",
                (doc.external_id, doc.source, doc.uri, _text(doc.title), doc.library,
                 _text(meta_json), content, doc.sha256, doc.size_bytes, doc.mtime_ns,
                 len(chunks), at, at)).fetchone()[0]
        else:
            doc_id = row[0]
            removed = self._delete_chunks(doc_id, [c.sha256 for c in chunks])
            self._sql(
                "UPDATE documents SET source = %s, uri = %s, title = %s, library = %s, "
                "metadata = %s::jsonb, content = %s, content_sha256 = %s, size_bytes = %s, "
                "mtime_ns = %s, chunk_count = %s, updated_at = %s WHERE doc_id = %s",
                (doc.source, doc.uri, _text(doc.title), doc.library, _text(meta_json), content,
                 doc.sha256, doc.size_bytes, doc.mtime_ns, len(chunks), at, doc_id))
        self._write_facts(doc_id, doc, facts.dated(doc, at, row[5] if row else None))
        # Each chunk's lines written with it: an update after would write every row again,
        # its vector into the vector index a second time.
        places = lines.rows(doc_id, doc.external_id, doc.source, doc.content,
                            [(c.idx, c.start, c.end) for c in chunks])
        self._insert_chunks(doc_id, doc.title, chunks, rows, [p[:4] for p in places])
        self._sql("DELETE FROM embed_queue WHERE doc_id = %s", (doc_id,))
        waiting = sum(1 for r in rows if r is None)
        if waiting:
            self._sql("INSERT INTO embed_queue(doc_id, rank) VALUES (%s, %s)", (doc_id, rank))
        return Written(doc_id, "inserted" if row is None else "updated", len(chunks), removed,
                       waiting)

    def _known(self, chunks: Sequence[Chunk]) -> list[Any]:
        """The stored vector of each chunk whose text the index holds with one, else None."""
        found = stored_vectors(lambda sql, args: self._sql(sql, args).fetchall(),
                               (c.sha256 for c in chunks))
        return [found.get(c.sha256) for c in chunks]

    def add_vectors(self, doc_id: int, sha256: str, chunks: Sequence[Chunk],
                    vectors: bytes) -> bool:
        """As the SQLite store's: the chunks keep their ids and get their vectors in place."""
        check_vectors(f"document {doc_id}", len(chunks), vectors, self.dim)
        row = self._sql("SELECT d.content_sha256 FROM embed_queue q JOIN documents d "
                        "ON d.doc_id = q.doc_id WHERE q.doc_id = %s FOR UPDATE OF q",
                        (doc_id,)).fetchone()
        if row is None or row[0] != sha256:
            return False
        have = self._sql("SELECT idx, text_sha256 FROM chunks WHERE doc_id = %s AND "
                         "embedding IS NULL ORDER BY idx", (doc_id,)).fetchall()
        if [tuple(r) for r in have] != [(c.idx, c.sha256) for c in chunks]:
            return False
        matrix = np.frombuffer(vectors, np.float32).reshape(len(chunks), self.dim)
        self._conn.cursor().executemany(
            b"UPDATE chunks SET embedding = %b WHERE doc_id = %s AND idx = %s",
            [(matrix[i], doc_id, c.idx) for i, c in enumerate(chunks)])
        self._sql("DELETE FROM embed_queue WHERE doc_id = %s", (doc_id,))
        return True

    def _write_facts(self, doc_id: int, doc: DocRecord, found: DocFacts) -> None:
        """Properties, tags, dates, links and the names links may use for the document."""
        tags = facts.tags_of(found, doc.metadata)
        self._sql("UPDATE documents SET properties = %s::jsonb, tags = %s::jsonb, "
                  "created = %s, modified = %s WHERE doc_id = %s",
                  (_text(json.dumps(found.properties, ensure_ascii=False, sort_keys=True)),
                   _text(json.dumps(tags, ensure_ascii=False)), found.created, found.modified,
                   doc_id))
        self._sql("DELETE FROM doc_tags WHERE doc_id = %s", (doc_id,))
        if tags:
            self._conn.cursor().executemany(
                b"INSERT INTO doc_tags(tag, doc_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                [(_text(tag.lower()), doc_id) for tag in dict.fromkeys(tags)])
        schema.write_links(self._conn, doc_id, found.links, doc_keys(
            doc.external_id, doc.source, {**found.properties, **doc.metadata}))

    def _insert_chunks(self, doc_id: int, title: str, chunks: Sequence[Chunk],
                       matrix: Sequence[Any], places: Sequence[tuple[Any, ...]]) -> None:
        """Chunks with their vectors (those without, None, wait for them) and their lines
        and pages (`places`, store/lines.py's)."""
        if not chunks:
            return
        # A row at a time (not a list): chunks that cut their text when read (an import's)
        # are held one at a time; with the words as SQLite's FTS5 holds them (tokens.py),
        # and how many.
        self._conn.cursor().executemany(
            ("INSERT INTO chunks(doc_id, idx, start_off, end_off, tokens, text_sha256, section, "
             "title, words, embedding, tsv, title_terms, text_terms, start_line, end_line, "
             "start_page, end_page) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %b, "
             f"{tokens.TSV}, %s, %s, %s, %s, %s, %s)").encode(),
            ((doc_id, c.idx, c.start, c.end, c.tokens, c.sha256, _text(c.section), _text(title),
              _text(c.keyword_text), matrix[i],
              *tokens.chunk_row(_text(title), _text(c.section), _text(c.keyword_text)),
              *places[i]) for i, c in enumerate(chunks)))

    def delete_doc(self, doc_id: int) -> tuple[int, int] | None:
        row = self._sql("SELECT doc_id FROM documents WHERE doc_id = %s FOR UPDATE",
                        (doc_id,)).fetchone()
        if row is None:
            return None
        removed = self._delete_chunks(doc_id)
        self._sql("DELETE FROM documents WHERE doc_id = %s", (doc_id,))
        return doc_id, removed

    def _delete_chunks(self, doc_id: int, after: Sequence[str] = ()) -> int:
        """Delete a document's chunks; how many had no successor among the text digests
        `after` (its new version's), whose vectors are kept (`keep_removed`)."""
        vectors = "embedding" if self.keep_s > 0 else "NULL"  # only those to keep
        rows = self._sql(f"DELETE FROM chunks WHERE doc_id = %s RETURNING idx, text_sha256, "
                         f"{vectors}", (doc_id,)).fetchall()
        rows.sort(key=lambda r: r[0])
        gone = without_successor([r[1] for r in rows], after)
        self.keep_vectors([(rows[i][1], np.asarray(rows[i][2].to_numpy(), np.float32))
                           for i in gone if rows[i][2] is not None])
        return len(gone)

    def keep_vectors(self, rows: Sequence[tuple[str, Any]]) -> None:
        if not rows or self.keep_s <= 0:
            return
        at = time.time()
        self._conn.cursor().executemany(
            b"INSERT INTO kept_vectors(text_sha256, embedding, kept_at) VALUES (%s, %b, %s) "
            b"ON CONFLICT (text_sha256) DO UPDATE SET embedding = excluded.embedding, "
            b"kept_at = excluded.kept_at", [(sha, vector, at) for sha, vector in rows])
        self._kept += len(rows)
