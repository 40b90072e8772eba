"""The words of a Postgres index, as SQLite's FTS5 tokenizes them: porter stems of unicode61
tokens, diacritics removed, CJK runs as bigrams (core/cjk.py's `index_text`), no stop words
dropped. FTS5 itself makes them, in an in-memory table with SQLite's tokenize option, so both
stores hold the same terms and count the same lengths; Postgres gets them as text of
space-separated terms, which its configuration WORDS (the `simple` dictionary, no stemming
and no stop words) keeps as they are."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pocketmcp.core.cjk import index_text
from pocketmcp.store.sqlite.connect import sqlite_module

# SQLite's chunks_fts and documents_fts (store/sqlite/schema.py).
TOKENIZE = "porter unicode61 remove_diacritics 2"
WORDS = "pocketmcp_words"  # the text search configuration, made in the index's schema
# Token types of Postgres's parser that space-separated terms can be read as.
TOKEN_TYPES = "asciiword, word, numword, int, uint, float, sfloat, version"
MIGRATION = (
    f"CREATE TEXT SEARCH CONFIGURATION {WORDS} (PARSER = pg_catalog.default)",
    f"ALTER TEXT SEARCH CONFIGURATION {WORDS} ADD MAPPING FOR {TOKEN_TYPES} "
    "WITH pg_catalog.simple",
)
# A chunk's tsvector: the columns of SQLite's chunk (its title column, A for the document's
# title or B for the section path that takes its place, and C, its text), and D, the
# document's title where a section path took its place (for whole documents only). Each
# as WORDS reads the terms given; CHUNK_WEIGHTS restricts a tsquery's word to SQLite's
# columns.
TSV = (f"setweight(to_tsvector('{WORDS}', %s), 'A') || "
       f"setweight(to_tsvector('{WORDS}', %s), 'B') || "
       f"setweight(to_tsvector('{WORDS}', %s), 'C') || "
       f"setweight(to_tsvector('{WORDS}', %s), 'D')")
CHUNK_WEIGHTS = "ABC"


def chunk_row(title: str, section: str, text: str) -> tuple[str, str, str, str, int, int]:
    """TSV's four texts for a chunk, then the terms in its title column and in its text."""
    (t, nt), (s, ns), (w, nw) = spelled([title, section, text])
    return ("", s, w, t, ns, nw) if section else (t, "", w, "", nt, nw)


def query_of(word_terms: Sequence[str], weights: str = "") -> str:
    """A tsquery text: one word's terms, in a row when several."""
    return " <-> ".join(literal(t) + (":" + weights if weights else "") for t in word_terms)


def literal(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


_lock = threading.Lock()
_conn: Any = None


def _table() -> Any:
    global _conn
    if _conn is None:
        conn = sqlite_module().connect(":memory:", check_same_thread=False,
                                       isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{TOKENIZE}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        _conn = conn
    return _conn


def terms(texts: Sequence[str]) -> list[list[str]]:
    """Each text's terms in order, as FTS5 holds them."""
    out: list[list[str]] = [[] for _ in texts]
    if not any(texts):
        return out
    with _lock:
        conn = _table()
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)",
                             [(i, index_text(t)) for i, t in enumerate(texts) if t])
            for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
                out[int(doc)].append(str(term))
        finally:
            # Left empty whatever happened: a failed insert must not leave rows that every
            # later call's rowids would collide with.
            conn.execute("ROLLBACK")
    return out


def spelled(texts: Sequence[str]) -> list[tuple[str, int]]:
    """Each text as the space-separated terms Postgres is given, with how many there are."""
    return [(" ".join(found), len(found)) for found in terms(texts)]
