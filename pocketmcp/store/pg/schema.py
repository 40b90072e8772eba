"""The tables of a Postgres index and their versioned migrations (`schema_version`).

A chunk's vector is a pgvector column with an HNSW index (cosine); its words are a tsvector
weighted A (document title), B (section path), C (text), with a GIN index. External ids and
tags sort byte-wise (COLLATE "C") as SQLite's do, so pages and prefix ranges agree.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from pocketmcp.core.identity import Identity
from pocketmcp.core.notes import doc_keys, is_note_path, read_note
from pocketmcp.core.paths import path_of
from pocketmcp.errors import ModelMismatchError, SchemaTooNewError
from pocketmcp.messages import Link
from pocketmcp.store import lines
from pocketmcp.store.pg import connect, tokens
from pocketmcp.store.pg.target import PgTarget

LOCK_MIGRATE = 7401  # advisory lock namespace: migrating a schema
# Text search configuration of the first versions' tsvector; since then the words are
# tokenized as SQLite's (tokens.py) and read with tokens.WORDS.
TEXT_CONFIG = "english"
CHUNK_TERMS = ("UPDATE chunks SET tsv = " + tokens.TSV + ", title_terms = %s, "
               "text_terms = %s WHERE chunk_id = %s")


def _links_of_documents(conn: psycopg.Connection[Any]) -> None:
    """Fill in the links and link names of documents indexed before they were kept: links
    are read from the stored text of notes (and raw text), as the SQLite store's migration
    does; names from each document's id, properties and metadata."""
    after = 0
    while rows := conn.execute(
            "SELECT doc_id, external_id, source, content, metadata, properties FROM documents "
            "WHERE doc_id > %s ORDER BY doc_id LIMIT 200", (after,)).fetchall():
        after = rows[-1][0]
        for doc_id, external_id, source, content, metadata, properties in rows:
            path = path_of(external_id, source)
            links = read_note(content, folder=posixpath.dirname(path or "")).facts.links if (
                source == "raw" or (path is not None and is_note_path(path))) else ()
            write_links(conn, doc_id, links, doc_keys(external_id, source,
                                                      {**properties, **metadata}))


def write_links(conn: psycopg.Connection[Any], doc_id: int, links: Sequence[Link],
                keys: Sequence[str]) -> None:
    """Replace a document's links (in order) and the names links may use for it."""
    conn.execute("DELETE FROM links WHERE doc_id = %s", (doc_id,))
    conn.execute("DELETE FROM doc_keys WHERE doc_id = %s", (doc_id,))
    if links:
        conn.cursor().executemany(
            "INSERT INTO links(doc_id, idx, target, key, kind) VALUES (%s, %s, %s, %s, %s)",
            [(doc_id, i, _text(link.target), _text(link.key), link.kind)
             for i, link in enumerate(links)])
    if keys:
        conn.cursor().executemany(
            "INSERT INTO doc_keys(key, doc_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            [(_text(key), doc_id) for key in keys])


def _text(value: str) -> str:
    return value.replace("\x00", "\ufffd")  # Postgres text cannot hold NUL


def _chunk_lines(conn: psycopg.Connection[Any]) -> None:
    """Lines of the chunks written before they were stored, a page of documents at a time
    (texts can be large)."""
    def documents() -> Any:
        after = 0
        while found := conn.execute(
                "SELECT doc_id, external_id, source, content FROM documents WHERE doc_id > %s "
                "ORDER BY doc_id LIMIT 200", (after,)).fetchall():
            yield from found
            after = found[-1][0]

    lines.fill(documents(), lambda doc_id: conn.execute(
        "SELECT idx, start_off, end_off FROM chunks WHERE doc_id = %s", (doc_id,)).fetchall(),
        lambda rows: conn.cursor().executemany(lines.UPDATE.replace("?", "%s"), rows))


def fill_chunk_terms(conn: psycopg.Connection[Any]) -> None:
    """The words of chunks written without them (before, or copied in by hand), as SQLite's
    FTS5 tokenizes them."""
    after = 0
    while found := conn.execute(
            "SELECT chunk_id, title, section, words FROM chunks WHERE chunk_id > %s "
            "ORDER BY chunk_id LIMIT 500", (after,)).fetchall():
        after = found[-1][0]
        conn.cursor().executemany(CHUNK_TERMS, [(*tokens.chunk_row(*row[1:]), row[0])
                                                for row in found])


# Each migration is a list of steps: SQL statements (`{dim}`: the embedding dimension,
# `{config}`: TEXT_CONFIG, `{m}` and `{ef_construction}`: the place's HNSW graph), or
# functions of the connection for what SQL cannot say. All of them run in one transaction.
Step = str | Callable[[psycopg.Connection[Any]], None]
MIGRATIONS: tuple[tuple[Step, ...], ...] = (
    (
        "CREATE TABLE meta(key text PRIMARY KEY, value text NOT NULL)",
        """CREATE TABLE documents(
               doc_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               external_id text COLLATE "C" NOT NULL UNIQUE,
               source text NOT NULL CHECK (source IN ('file', 'url', 'raw')),
               uri text,
               title text NOT NULL DEFAULT '',
               library text NOT NULL DEFAULT 'default',
               metadata jsonb NOT NULL DEFAULT '{}',
               content text NOT NULL,
               content_sha256 text NOT NULL,
               size_bytes bigint,
               mtime_ns bigint,
               chunk_count integer NOT NULL DEFAULT 0,
               created_at text NOT NULL,
               updated_at text NOT NULL,
               properties jsonb NOT NULL DEFAULT '{}',
               tags jsonb NOT NULL DEFAULT '[]',
               created text COLLATE "C",
               modified text COLLATE "C")""",
        "CREATE INDEX documents_library ON documents(library)",
        "CREATE INDEX documents_modified ON documents(modified)",
        "CREATE INDEX documents_created ON documents(created)",
        """CREATE TABLE doc_tags(
               tag text COLLATE "C" NOT NULL,
               doc_id bigint NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               PRIMARY KEY (tag, doc_id))""",
        "CREATE INDEX doc_tags_doc ON doc_tags(doc_id)",
        """CREATE TABLE chunks(
               chunk_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
               doc_id bigint NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               idx integer NOT NULL,
               start_off integer NOT NULL,
               end_off integer NOT NULL,
               tokens integer NOT NULL,
               text_sha256 text NOT NULL,
               section text NOT NULL DEFAULT '',
               title text NOT NULL DEFAULT '',
               words text NOT NULL,
               embedding public.vector({dim}) NOT NULL,
               tsv tsvector GENERATED ALWAYS AS (
                   setweight(to_tsvector('{config}', title), 'A') ||
                   setweight(to_tsvector('{config}', section), 'B') ||
                   setweight(to_tsvector('{config}', words), 'C')) STORED,
               UNIQUE (doc_id, idx))""",
        "CREATE INDEX chunks_text ON chunks(text_sha256)",
        "CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding public.vector_cosine_ops) "
        "WITH (m = {m}, ef_construction = {ef_construction})",
        "CREATE INDEX chunks_tsv ON chunks USING gin (tsv)",
    ),
    (
        # Links between documents, resolved when read (as the SQLite store's facts.py): a
        # link points at every document that has its key.
        """CREATE TABLE links(
               doc_id bigint NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               idx integer NOT NULL,
               target text NOT NULL,
               key text COLLATE "C" NOT NULL,
               kind text NOT NULL CHECK (kind IN ('wiki', 'markdown')),
               PRIMARY KEY (doc_id, idx))""",
        "CREATE INDEX links_key ON links(key)",
        """CREATE TABLE doc_keys(
               key text COLLATE "C" NOT NULL,
               doc_id bigint NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
               PRIMARY KEY (key, doc_id))""",
        "CREATE INDEX doc_keys_doc ON doc_keys(doc_id)",
        _links_of_documents,
    ),
    (
        # Two stages per document, as the SQLite store's: chunks are written for keyword
        # search as soon as they are chunked (no vector yet: NULL, which HNSW leaves out),
        # and get their vectors when the embedder returns them; embed_queue ranks the
        # documents that wait, most recent change first.
        "ALTER TABLE chunks ALTER COLUMN embedding DROP NOT NULL",
        "CREATE INDEX chunks_waiting ON chunks(doc_id) WHERE embedding IS NULL",
        """CREATE TABLE embed_queue(
               doc_id bigint PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
               rank bigint NOT NULL)""",
        "CREATE INDEX embed_queue_rank ON embed_queue(rank DESC, doc_id DESC)",
    ),
    (
        # Each chunk's lines (and a PDF's pages) in its document's text (store/lines.py),
        # counted once here for the chunks written before.
        *(f"ALTER TABLE chunks ADD COLUMN {column} integer" for column in lines.COLUMNS),
        _chunk_lines,
    ),
    (
        # Vectors of removed chunks, kept a while by text digest, as the SQLite store's.
        """CREATE TABLE kept_vectors(
               text_sha256 text PRIMARY KEY,
               embedding public.vector({dim}) NOT NULL,
               kept_at double precision NOT NULL)""",
        "CREATE INDEX kept_vectors_at ON kept_vectors(kept_at)",
    ),
    (
        # The words as SQLite's FTS5 holds them (tokens.py): the same terms, stop words kept,
        # and each chunk's length in them, so that BM25 is FTS5's over the same terms and
        # lengths. The tsvector is written with the chunk from then on.
        *tokens.MIGRATION,
        "ALTER TABLE chunks ALTER COLUMN tsv DROP EXPRESSION",
        "ALTER TABLE chunks ADD COLUMN title_terms integer NOT NULL DEFAULT 0",
        "ALTER TABLE chunks ADD COLUMN text_terms integer NOT NULL DEFAULT 0",
        fill_chunk_terms,
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    return row is not None and row[0] is not None


def stored_identity(conn: psycopg.Connection[Any], place: PgTarget) -> Identity | None:
    """What the index records of its embeddings; None before a writer made it."""
    if not _exists(conn, f'"{place.schema}".meta'):
        return None
    rows = conn.execute(sql.SQL("SELECT key, value FROM {}.meta").format(
        sql.Identifier(place.schema))).fetchall()
    return Identity.from_meta({str(k): str(v) for k, v in rows})


def recorded_value(conn: psycopg.Connection[Any], place: PgTarget, key: str) -> str | None:
    """The meta row `key`; None when there is none (or no schema yet)."""
    if not _exists(conn, f'"{place.schema}".meta'):
        return None
    row = conn.execute(sql.SQL("SELECT value FROM {}.meta WHERE key = %s").format(
        sql.Identifier(place.schema)), (key,)).fetchone()
    return None if row is None else str(row[0])


def migrate(conn: psycopg.Connection[Any], place: PgTarget, identity: Identity, *,
            rebuild: bool = False) -> int:
    """Create or bring the schema to SCHEMA_VERSION in one transaction (one process at a
    time: an advisory lock); the version found. `rebuild` drops the schema first."""
    schema = sql.Identifier(place.schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                     (LOCK_MIGRATE, place.schema))
        if rebuild:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {}.schema_version("
                             "version integer NOT NULL)").format(schema))
        row = conn.execute(sql.SQL("SELECT max(version) FROM {}.schema_version").format(
            schema)).fetchone()
        found = int(row[0]) if row is not None and row[0] is not None else 0
        if found > SCHEMA_VERSION:
            raise SchemaTooNewError(place.describe(), found, SCHEMA_VERSION)
        stored = stored_identity(conn, place)
        if stored is not None and stored != identity:
            raise ModelMismatchError(place.describe(), stored.describe(),
                                     stored.differences(identity))
        for version in range(found, SCHEMA_VERSION):
            for step in MIGRATIONS[version]:
                if callable(step):
                    step(conn)
                    continue
                text = (step.replace("{dim}", str(identity.dim))
                        .replace("{config}", TEXT_CONFIG).replace("{m}", str(place.hnsw_m))
                        .replace("{ef_construction}", str(place.hnsw_ef_construction)))
                conn.execute(sql.SQL(text))  # our own constants
            conn.execute(sql.SQL("INSERT INTO {}.schema_version VALUES (%s)").format(schema),
                         (version + 1,))
        for key, value in identity.meta().items():
            conn.execute(sql.SQL("INSERT INTO {}.meta(key, value) VALUES (%s, %s) "
                                 "ON CONFLICT (key) DO NOTHING").format(schema), (key, value))
    return found



def drop(place: PgTarget) -> None:
    """Remove the index with everything in it (blocking; eval's throwaway indexes)."""
    conn = connect.connect(place, autocommit=True)
    try:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(place.schema)))
    except psycopg.Error as exc:
        raise connect.store_error(exc, place) from exc
    finally:
        conn.close()
