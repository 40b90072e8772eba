"""The one connection that writes an index: documents, chunks and vectors, in transactions.

The only SQL that changes rows outside migrations. An SqliteWriter holds the index's writer
lock (a file beside it), so one process at a time can write; inside that process only the
writer actor (pipeline/writer.py) calls it, from one worker thread at a time. A whole batch
is one transaction, so a cancelled caller can never leave a transaction half done. Right
after each commit it brings the index's vector file up to date (vecwriter.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout

from pocketmcp import private
from pocketmcp.core import markdown
from pocketmcp.core.cjk import index_text
from pocketmcp.core.identity import Identity
from pocketmcp.errors import StoreError, WriterBusyError
from pocketmcp.messages import Chunk, DocFacts, DocRecord, Written
from pocketmcp.store import facts, lines
from pocketmcp.store.sqlite import schema
from pocketmcp.store.sqlite.connect import open_sync_writer, sqlite_errors
from pocketmcp.store.sqlite.files import lock_path
from pocketmcp.store.sqlite.log import TOKEN_KEY, VECTOR_BY_ID, ChunkLog
from pocketmcp.store.sqlite.reads import ReaderPool
from pocketmcp.store.sqlite.staged import NO_DEBT, StagedWrites
from pocketmcp.store.sqlite.vectors.file import new_token
from pocketmcp.store.sqlite.vectors.writer import VectorFileWriter
from pocketmcp.store.writes import CommonWrites, check_vectors, now, without_successor

T = TypeVar("T")
VIEW_READERS = 4  # connections of the pipeline's own view of its index
LOG_KEEP = 200_000  # chunk changes kept for vector files (and their readers) to follow


LAST_DOC_ID = "last_deleted_doc_id"  # meta key: the highest doc_id deleted, never given again


class SqliteWriter(StagedWrites, CommonWrites):
    """Holds the writer lock of one index file and its only writing connection (its writes
    alike on every store: store/writes.py)."""

    def __init__(self, db_path: Path, identity: Identity, *, rebuild: bool = False) -> None:
        self.db_path = db_path
        self.identity = identity
        self.dim = identity.dim
        try:
            private.folder(db_path.parent)
        except OSError as exc:  # a file in the way, no permission, a full disk
            raise StoreError(f"cannot create the folder of {db_path}: {exc}") from exc
        self._closed = False
        self._commits = 0
        self._fresh: dict[int, tuple[int, bytes]] = {}  # chunks written in this transaction
        self._views: list[ReaderPool] = []  # closed with the writer (if not before)
        # Not thread-local: the lock is taken in a worker thread and released where the
        # writer closes, often another thread.
        self._lock = FileLock(str(lock_path(db_path)), blocking=False, thread_local=False,
                              mode=private.FILE_MODE)
        try:
            self._lock.acquire()
        except Timeout:
            raise WriterBusyError(db_path) from None
        try:
            self._conn = open_sync_writer(db_path)
            self._held = ""  # the text `held_text()` gives: `_with_text`
            self._conn.create_function("held_text", 0, self._held_text)
            if rebuild:
                schema.drop_all(self._conn)
            schema.migrate(self._conn, db_path, identity)
            log = ChunkLog(self._conn, db_path)
            self.vectors = VectorFileWriter(identity.dim, self._token(log), log)
            # Totals left unsettled by a process that ended between its commit and the
            # settling: the first transaction settles them; after that the flag tells.
            self.owes_keywords = self.keywords_owed()
        except BaseException:
            self._lock.release()
            raise

    def _token(self, log: ChunkLog) -> bytes:
        """The database's identity, made on first use; its vector file carries a copy."""
        token = log.token()
        if token is None:
            token = new_token()
            self.record(TOKEN_KEY, token.hex())
        return token

    def record(self, key: str, value: str) -> None:
        """Inside the current transaction when there is one."""
        self._sql("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @property
    def where(self) -> str:
        return str(self.db_path)

    @property
    def wants_repair(self) -> bool:
        return self.vectors.wants_repair

    def stop_repair(self) -> None:
        """Stop the vector file's repair soon (the next start takes it up again)."""
        self.vectors.stop()

    def view(self) -> ReaderPool:
        # The hasher's readers look files up at once (each with the file's read and note in
        # the same worker-thread step), the embedder beside them.
        view = ReaderPool(self.db_path, size=VIEW_READERS)
        self._views.append(view)
        return view

    def batch(self, work: Callable[[], T], keys: Sequence[str]) -> T:
        """`work()` in one transaction. The file's writer lock already keeps every other
        writer out, so `keys` need no locks of their own and nothing is retried."""
        with self.transaction():
            if self.owes_keywords:
                self.settle_keywords()
            done = work()
            self.bound_kept()
        if self.owes_keywords:  # FTS5 saved its totals at the commit: correct them now
            with self.transaction():
                self.settle_keywords()
        return done

    @property
    def commits(self) -> int:
        """Transactions committed through this writer since it opened."""
        return self._commits

    def close(self) -> None:
        """Close its views, checkpoint, close and release the lock. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for view in self._views:
            view.close()
        self.vectors.close()
        try:
            self._conn.execute("PRAGMA optimize")
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite_errors():
            pass
        finally:
            self._conn.close()
            self._lock.release()

    # -- transactions -------------------------------------------------------------------------

    def begin(self) -> None:
        self._sql("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self._commits += 1
        if self._commits % 256 == 0:
            # Readers further behind than this reload their vectors in full.
            self._sql("DELETE FROM chunk_log WHERE seq <= "
                      "(SELECT max(seq) FROM chunk_log) - ?", (LOG_KEEP,))
        self._note_debt()
        self._sql("COMMIT")
        fresh, self._fresh = self._fresh, {}
        self.vectors.after_commit(fresh)

    def rollback(self) -> None:
        self._fresh = {}
        self._kept = 0
        self._owed = NO_DEBT
        self.owes_keywords = True  # a settling undone with the rest: check at the next
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def repair_vectors(self) -> None:
        """Bring the vector file up to date and check it (blocking; a background thread)."""
        self.vectors.repair()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when the block raises."""
        self.begin()
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.commit()

    @contextmanager
    def item(self) -> Iterator[None]:
        """A savepoint: an error inside undoes this item only, the batch goes on."""
        self._sql("SAVEPOINT item")
        owed = self._owed
        try:
            yield
        except BaseException:
            self._sql("ROLLBACK TO item")
            self._sql("RELEASE item")
            self._owed = owed  # the item's keyword rows are back
            raise
        self._sql("RELEASE item")

    def _sql(self, sql: str, args: Sequence[Any] = ()) -> Any:
        try:
            return self._conn.execute(sql, args)
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._sql(sql, args)

    def _held_text(self) -> str | bytes:
        """The text `_with_text` holds, as SQL reads it (`CAST(held_text() AS TEXT)`): UTF-8
        made here when it is not ASCII, and let go once SQLite has its copy (a str's own
        UTF-8, made when it is bound, stays with the str as long as it lives)."""
        text = self._held
        return text if text.isascii() else text.encode()

    def _with_text(self, text: str, sql: str, args: Sequence[Any]) -> Any:
        """Run `sql`, in which `CAST(held_text() AS TEXT)` stands for `text`. SQLite copies
        the text once, for this statement alone: a bound text would stay with the cached
        statement until it is bound again (a large document's text held twice more, beside
        the next one's)."""
        self._held = text
        try:
            return self._sql(sql, args)
        finally:
            self._held = ""

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self._conn.executemany(sql, rows)
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    # -- writes (call between begin() and commit()) --------------------------------------------

    def upsert(self, doc: DocRecord, chunks: Sequence[Chunk], vectors: bytes | None, *,
               rank: int = 0) -> Written:
        """Insert or replace one document and all its chunks. A document whose text, title,
        library and metadata are unchanged keeps its chunks: only its stat, and its facts
        when they changed, are written. Without `vectors` its chunks are written for keyword
        search and wait for their vectors (`add_vectors`), queued at `rank` (higher first)."""
        if vectors is not None:
            check_vectors(doc.external_id, len(chunks), vectors, self.dim)
        row = self._sql("SELECT doc_id, content_sha256, title, library, metadata, created "
                        "FROM documents WHERE external_id = ?", (doc.external_id,)).fetchone()
        at = now()
        metadata = json.dumps(doc.metadata, ensure_ascii=False, sort_keys=True)
        if row is not None and (row[1], row[2], row[3], row[4]) == (
            doc.sha256, doc.title, doc.library, metadata
        ):
            self._sql("UPDATE documents SET size_bytes = ?, mtime_ns = ? WHERE doc_id = ?",
                      (doc.size_bytes, doc.mtime_ns, row[0]))
            have = facts.current(self._sql, row[0])
            kept = facts.with_dates(doc.facts, have[3] or at, have[2])
            if facts.stored(kept, doc.metadata) == have:
                return Written(row[0], "unchanged", len(chunks), 0)
            self._write_facts(row[0], doc, kept)  # the text is the same: chunks stay
            self._sql("UPDATE documents SET updated_at = ? WHERE doc_id = ?", (at, row[0]))
            return Written(row[0], "updated", len(chunks), 0)
        removed = 0
        # Without vectors, those of text the index holds already (the document's old
        # version, before it goes) are taken at once: only the rest wait.
        rows = self._rows_of(chunks, vectors) if vectors is not None else (
            self._known(chunks))
        if row is None:
            doc_id = self._sql(
                "INSERT INTO documents(doc_id, external_id, source, uri, title, library, "
                "metadata, content, content_sha256, size_bytes, mtime_ns, chunk_count, "
                "created_at, updated_at) VALUES (max(coalesce((SELECT max(doc_id) FROM "
                "documents), 0), coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key "
                f"= '{LAST_DOC_ID}'), 0)) + 1, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?) "
                "RETURNING doc_id",
                (doc.external_id, doc.source, doc.uri, doc.title, doc.library, metadata,
                 doc.sha256, doc.size_bytes, doc.mtime_ns, len(chunks), at, at),
            ).fetchone()[0]
        else:
            doc_id = row[0]
            removed = self._delete_chunks(doc_id, [c.sha256 for c in chunks])
            self._sql(
                "UPDATE documents SET source = ?, uri = ?, title = ?, library = ?, metadata = ?, "
                "content = '', content_sha256 = ?, size_bytes = ?, mtime_ns = ?, "
                "chunk_count = ?, updated_at = ? WHERE doc_id = ?",
                (doc.source, doc.uri, doc.title, doc.library, metadata, doc.sha256,
                 doc.size_bytes, doc.mtime_ns, len(chunks), at, doc_id),
            )
        self._write_facts(doc_id, doc, facts.dated(doc, at, row[5] if row else None))
        # The text last, once the row has its other columns: SQLite rewrites a whole row for
        # each change to it, a large text with it.
        self._with_text(doc.content, "UPDATE documents SET content = "
                        "CAST(held_text() AS TEXT) WHERE doc_id = ?", (doc_id,))
        if row is not None:
            self._sql("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        self._with_text(index_text(markdown.clean(doc.content)),
                        "INSERT INTO documents_fts(rowid, title, content) "
                        "VALUES (?, ?, CAST(held_text() AS TEXT))", (doc_id, index_text(doc.title)))
        self._insert_chunks(doc_id, doc.title, chunks, rows)
        self._many(lines.UPDATE, lines.rows(doc_id, doc.external_id, doc.source, doc.content,
                                            [(c.idx, c.start, c.end) for c in chunks]))
        waiting = rows.count(None)
        if waiting:
            self._sql("INSERT INTO embed_queue(doc_id, rank) VALUES (?, ?)", (doc_id, rank))
        return Written(doc_id, "inserted" if row is None else "updated", len(chunks), removed,
                       waiting)

    def _write_facts(self, doc_id: int, doc: DocRecord, found: DocFacts) -> None:
        facts.write(self._sql, self._many, doc_id, external_id=doc.external_id,
                    source=doc.source, facts=found, metadata=doc.metadata)

    def _insert_chunks(self, doc_id: int, title: str, chunks: Sequence[Chunk],
                       vectors: Sequence[bytes | None]) -> None:
        """Chunks with their vectors; those without (None) wait for them."""
        if not chunks:
            return
        self._many(
            "INSERT INTO chunks(doc_id, idx, start_off, end_off, tokens, text_sha256, section, "
            "waiting) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(doc_id, c.idx, c.start, c.end, c.tokens, c.sha256, c.section, int(v is None))
             for c, v in zip(chunks, vectors, strict=True)],
        )
        ids = dict(self._sql("SELECT idx, chunk_id FROM chunks WHERE doc_id = ?",
                             (doc_id,)).fetchall())
        # A row at a time (not a list): chunks that cut their text when read (an import's)
        # are held one at a time.
        self._many("INSERT INTO chunks_fts(rowid, title, text) VALUES (?, ?, ?)",
                   ((ids[c.idx], index_text(c.section or title), index_text(c.keyword_text))
                    for c in chunks))
        self._write_vectors(doc_id, [ids[c.idx] for c in chunks], chunks, vectors)

    def _delete_chunks(self, doc_id: int, after: Sequence[str] = ()) -> int:
        """Delete a document's chunks; how many had no successor among the text digests
        `after` (its new version's), whose vectors are kept (`keep_removed`)."""
        rows = self._sql("SELECT chunk_id, waiting, text_sha256 FROM chunks WHERE doc_id = ? "
                         "ORDER BY idx", (doc_id,)).fetchall()
        gone = without_successor([r[2] for r in rows], after)
        if rows:
            if self.keep_s > 0:
                self.keep_vectors([(rows[i][2], found[2]) for i in gone if not rows[i][1] and (
                    found := self._sql(VECTOR_BY_ID, (rows[i][0],)).fetchone())])
            self._many("DELETE FROM vec_chunks WHERE chunk_id = ?",
                       [(i,) for i, waiting, _ in rows if not waiting])
            self._many("DELETE FROM chunks_fts WHERE rowid = ?",
                       [(i,) for i, waiting, _ in rows if not waiting])
            self._forget_keywords([i for i, waiting, _ in rows if waiting])
            self._sql("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
        self._sql("DELETE FROM embed_queue WHERE doc_id = ?", (doc_id,))
        return len(gone)

    def keep_vectors(self, rows: Sequence[tuple[str, Any]]) -> None:
        if not rows or self.keep_s <= 0:
            return
        at = time.time()
        self._many("INSERT INTO kept_vectors(text_sha256, embedding, kept_at) VALUES (?, ?, ?) "
                   "ON CONFLICT(text_sha256) DO UPDATE SET embedding = excluded.embedding, "
                   "kept_at = excluded.kept_at", [(sha, bytes(v), at) for sha, v in rows])
        self._kept += len(rows)

    def delete_doc(self, doc_id: int) -> tuple[int, int] | None:
        """Remove a document by doc_id; (doc_id, chunks removed), or None if absent."""
        if self._sql("SELECT 1 FROM documents WHERE doc_id = ?", (doc_id,)).fetchone() is None:
            return None
        removed = self._delete_chunks(doc_id)
        facts.remove(self._sql, doc_id)
        self._sql("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        self._sql("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
        # SQLite would give the highest id to the next document: a client still holding it
        # (a resource, a search's doc_id) would read another one. Ids are never given twice.
        self._sql("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
                  "max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                  (LAST_DOC_ID, str(doc_id)))
        return doc_id, removed
