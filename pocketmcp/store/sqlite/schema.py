"""Schema, versioned by migrations. Only the writer connection runs these."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pocketmcp.core import dates
from pocketmcp.core.cjk import has_cjk, index_text
from pocketmcp.core.identity import Identity
from pocketmcp.core.notes import is_note_path, read_note
from pocketmcp.core.paths import path_of
from pocketmcp.errors import ModelMismatchError, SchemaTooNewError
from pocketmcp.messages import DocFacts
from pocketmcp.store import facts, lines
from pocketmcp.store.folder import SCAN_KEY


def _bigram_cjk_rows(conn: Any) -> None:
    """Index the keyword rows of documents and chunks holding CJK text as bigrams, as the
    writer now does (core/cjk.py). Rows without CJK are indexed as they were: left alone."""
    cjk_docs = [doc_id for doc_id, title, content in conn.execute(
        "SELECT doc_id, title, content FROM documents") if has_cjk(title) or has_cjk(content)]
    for doc_id in cjk_docs:
        title, content = conn.execute("SELECT title, content FROM documents WHERE doc_id = ?",
                                      (doc_id,)).fetchone()
        # Contentless tables with contentless_delete=1 delete by rowid alone.
        conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        conn.execute("INSERT INTO documents_fts(rowid, title, content) VALUES (?, ?, ?)",
                     (doc_id, index_text(title), index_text(content)))
        chunks = conn.execute(
            "SELECT chunk_id, section, substr(?, start_off + 1, end_off - start_off) "
            "FROM chunks WHERE doc_id = ?", (content, doc_id)).fetchall()
        for chunk_id, section, text in chunks:
            head = section or title
            if has_cjk(head) or has_cjk(text):
                conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (chunk_id,))
                conn.execute("INSERT INTO chunks_fts(rowid, title, text) VALUES (?, ?, ?)",
                             (chunk_id, index_text(head), index_text(text)))


def _documents(conn: Any, columns: str, page: int = 200) -> Any:
    """(doc_id, columns...) of every document, a page at a time: texts can be large."""
    after = 0
    while rows := conn.execute(f"SELECT doc_id, {columns} FROM documents WHERE doc_id > ? "
                               "ORDER BY doc_id LIMIT ?", (after, page)).fetchall():
        yield from rows
        after = rows[-1][0]


def _note_facts(conn: Any) -> None:
    """Fill in the facts of documents indexed before they were kept: what notes (and raw
    text) say about themselves is read from their stored text; every document's dates fall
    back to its file's modification time, else to when it was written. Properties of PDF and
    Office files are read when they are next converted (a change, or `reindex` with force)."""
    def execute(sql: str, args: Any = ()) -> Any:
        return conn.execute(sql, args)

    for doc_id, external_id, source, content, metadata, mtime_ns, updated_at in _documents(
            conn, "external_id, source, content, metadata, mtime_ns, updated_at"):
        modified = dates.from_ns(mtime_ns) if mtime_ns else updated_at
        path = path_of(external_id, source)
        if source == "raw" or (path is not None and is_note_path(path)):
            found = read_note(content, folder=posixpath.dirname(path or ""),
                              modified=modified).facts
        else:
            found = DocFacts(created=modified, modified=modified)
        facts.write(execute, conn.executemany, doc_id, external_id=external_id, source=source,
                    facts=found, metadata=json.loads(metadata))


def _chunk_lines(conn: Any) -> None:
    lines.fill(_documents(conn, "external_id, source, content"), lambda doc_id: conn.execute(
        "SELECT idx, start_off, end_off FROM chunks WHERE doc_id = ?", (doc_id,)).fetchall(),
        lambda rows: conn.executemany(lines.UPDATE, rows))


# Each migration is a list of steps: SQL statements, where `{dim}` is the embedding
# dimension, or functions of the connection for what SQL cannot say. All of them run in one
# transaction.
Step = str | Callable[[Any], None]
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    (
        """CREATE TABLE meta(
               key TEXT PRIMARY KEY,
               value TEXT NOT NULL)""",
        """CREATE TABLE documents(
               doc_id INTEGER PRIMARY KEY,
               external_id TEXT NOT NULL UNIQUE,
               source TEXT NOT NULL CHECK (source IN ('file', 'url', 'raw')),
               uri TEXT,
               title TEXT NOT NULL DEFAULT '',
               library TEXT NOT NULL DEFAULT 'default',
               metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
               content TEXT NOT NULL,
               content_sha256 TEXT NOT NULL,
               size_bytes INTEGER,
               mtime_ns INTEGER,
               chunk_count INTEGER NOT NULL DEFAULT 0,
               created_at TEXT NOT NULL,
               updated_at TEXT NOT NULL)""",
        "CREATE INDEX documents_source ON documents(source, external_id)",
        "CREATE INDEX documents_library ON documents(library)",
        """CREATE TABLE chunks(
               chunk_id INTEGER PRIMARY KEY,
               doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               idx INTEGER NOT NULL,
               start_off INTEGER NOT NULL,
               end_off INTEGER NOT NULL,
               tokens INTEGER NOT NULL,
               text_sha256 TEXT NOT NULL)""",
        "CREATE UNIQUE INDEX chunks_doc ON chunks(doc_id, idx)",
        "CREATE INDEX chunks_text ON chunks(text_sha256)",
        """CREATE VIRTUAL TABLE vec_chunks USING vec0(
               chunk_id INTEGER PRIMARY KEY,
               embedding float[{dim}] distance_metric=cosine,
               doc_id INTEGER,
               +idx INTEGER,
               +start_off INTEGER,
               +end_off INTEGER,
               +text TEXT)""",
    ),
    (
        # Keyword search, and a log of chunk changes that in-memory vector indexes follow.
        # chunk_id becomes AUTOINCREMENT: ids only grow, so they stay sorted in memory.
        """CREATE TABLE chunks_new(
               chunk_id INTEGER PRIMARY KEY AUTOINCREMENT,
               doc_id INTEGER NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               idx INTEGER NOT NULL,
               start_off INTEGER NOT NULL,
               end_off INTEGER NOT NULL,
               tokens INTEGER NOT NULL,
               text_sha256 TEXT NOT NULL,
               section TEXT NOT NULL DEFAULT '')""",
        """INSERT INTO chunks_new(chunk_id, doc_id, idx, start_off, end_off, tokens, text_sha256)
               SELECT chunk_id, doc_id, idx, start_off, end_off, tokens, text_sha256
               FROM chunks""",
        "DROP TABLE chunks",
        "ALTER TABLE chunks_new RENAME TO chunks",
        "CREATE UNIQUE INDEX chunks_doc ON chunks(doc_id, idx)",
        "CREATE INDEX chunks_text ON chunks(text_sha256)",
        """CREATE VIRTUAL TABLE chunks_fts USING fts5(
               title, text, content='', contentless_delete=1,
               tokenize='porter unicode61 remove_diacritics 2')""",
        "CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, row)",
        """INSERT INTO chunks_fts(rowid, title, text)
               SELECT v.chunk_id, d.title, v.text FROM vec_chunks v
               JOIN documents d ON d.doc_id = v.doc_id""",
        """CREATE TABLE chunk_log(
               seq INTEGER PRIMARY KEY AUTOINCREMENT,
               chunk_id INTEGER NOT NULL,
               added INTEGER NOT NULL)""",
        """CREATE TRIGGER chunk_added AFTER INSERT ON chunks BEGIN
               INSERT INTO chunk_log(chunk_id, added) VALUES (new.chunk_id, 1); END""",
        """CREATE TRIGGER chunk_removed AFTER DELETE ON chunks BEGIN
               INSERT INTO chunk_log(chunk_id, added) VALUES (old.chunk_id, 0); END""",
    ),
    (
        # Keyword search over whole documents, for results with one match per document:
        # BM25 over a document's chunks one at a time misses words that sit in its others.
        """CREATE VIRTUAL TABLE documents_fts USING fts5(
               title, content, content='', contentless_delete=1,
               tokenize='porter unicode61 remove_diacritics 2')""",
        """INSERT INTO documents_fts(rowid, title, content)
               SELECT doc_id, title, content FROM documents""",
    ),
    (
        # Chinese, Japanese and Korean text is indexed as character bigrams, which unicode61
        # alone kept as one token per run of characters.
        _bigram_cjk_rows,
    ),
    (
        # What documents say about themselves: front matter and document properties, tags,
        # their own dates, and links between them (store/facts.py).
        *facts.MIGRATION,
        _note_facts,
    ),
    (
        # Two stages per document: its chunks are written for keyword search as soon as it
        # is chunked (`waiting`, ranked in embed_queue, most recent change first), and get
        # their vectors when the embedder returns them. Waiting chunks stay out of the chunk
        # log, so vector files only ever hold chunks with vectors.
        "ALTER TABLE chunks ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX chunks_waiting ON chunks(doc_id) WHERE waiting = 1",
        "CREATE TABLE embed_queue(doc_id INTEGER PRIMARY KEY, rank INTEGER NOT NULL)",
        "CREATE INDEX embed_queue_rank ON embed_queue(rank DESC, doc_id DESC)",
        "DROP TRIGGER chunk_added",
        "DROP TRIGGER chunk_removed",
        """CREATE TRIGGER chunk_added AFTER INSERT ON chunks WHEN new.waiting = 0 BEGIN
               INSERT INTO chunk_log(chunk_id, added) VALUES (new.chunk_id, 1); END""",
        """CREATE TRIGGER chunk_removed AFTER DELETE ON chunks WHEN old.waiting = 0 BEGIN
               INSERT INTO chunk_log(chunk_id, added) VALUES (old.chunk_id, 0); END""",
    ),
    (
        # A waiting chunk keeps its id when its vector comes: its row is updated in place,
        # and the chunk log notes it then, as it notes a chunk written with its vector.
        # Vector files no longer hold their ids in ascending order (vectors/file.py).
        """CREATE TRIGGER chunk_embedded AFTER UPDATE OF waiting ON chunks
               WHEN old.waiting = 1 AND new.waiting = 0 BEGIN
               INSERT INTO chunk_log(chunk_id, added) VALUES (new.chunk_id, 1); END""",
    ),
    (
        # Each chunk's lines (and a PDF's pages) in its document's text (store/lines.py),
        # counted once here for the chunks written before.
        *(f"ALTER TABLE chunks ADD COLUMN {column} INTEGER" for column in lines.COLUMNS),
        _chunk_lines,
    ),
    (
        # Vectors of removed chunks, kept a while by text digest (store/writes.py): the same
        # text coming back takes its vector from here instead of from the model.
        """CREATE TABLE kept_vectors(
               text_sha256 TEXT PRIMARY KEY,
               embedding BLOB NOT NULL,
               kept_at REAL NOT NULL)""",
        "CREATE INDEX kept_vectors_at ON kept_vectors(kept_at)",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def scan_recorded(conn: Any) -> bool:
    """Whether the index's writer has finished its first scan, as the index records it."""
    if not _one(conn, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"):
        return False
    row = _one(conn, "SELECT value FROM meta WHERE key = ?", (SCAN_KEY,))
    return row is None or row[0] == "done"


def _one(conn: Any, sql: str, args: tuple[Any, ...] = ()) -> Any:
    return conn.execute(sql, args).fetchone()


def stored_identity(conn: Any) -> Identity | None:
    """The provider, model, dimension and prefixes recorded in the index; None for an empty
    file."""
    if not _one(conn, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"):
        return None
    meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    return Identity.from_meta(meta)


def check_identity(conn: Any, db_path: Path, identity: Identity) -> None:
    stored = stored_identity(conn)
    if stored is not None and stored != identity:
        raise ModelMismatchError(db_path, stored.describe(), stored.differences(identity))


def _record_identity(conn: Any, identity: Identity, *, replace: bool) -> None:
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    conn.executemany(f"{verb} INTO meta(key, value) VALUES (?, ?)",
                     list(identity.meta().items()))


def schema_version(conn: Any) -> int:
    return int(_one(conn, "PRAGMA user_version")[0])


def migrate(conn: Any, db_path: Path, identity: Identity) -> int:
    """Bring the schema to SCHEMA_VERSION in one transaction; returns the version found.
    An index that records less of its identity than today's (it was made before providers
    and prefixes) gets the rest written down."""
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise SchemaTooNewError(db_path, found, SCHEMA_VERSION)
    check_identity(conn, db_path, identity)
    if found == SCHEMA_VERSION:
        recorded = {row[0] for row in conn.execute("SELECT key FROM meta")}
        if not set(identity.meta()) <= recorded:
            conn.execute("BEGIN IMMEDIATE")
            try:
                _record_identity(conn, identity, replace=False)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        for version in range(found, SCHEMA_VERSION):
            for step in MIGRATIONS[version]:
                if isinstance(step, str):
                    conn.execute(step.replace("{dim}", str(identity.dim)))
                else:
                    step(conn)
        _record_identity(conn, identity, replace=True)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def drop_all(conn: Any) -> None:
    """Empty the file for a rebuild (the writer's own connection only)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for kind in ("sql LIKE 'CREATE VIRTUAL%'", "name NOT LIKE 'sqlite_%'"):
            names = [row[0] for row in conn.execute(
                f"SELECT name FROM sqlite_master WHERE type = 'table' AND {kind}")]
            for name in names:
                conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        conn.execute("PRAGMA user_version = 0")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
