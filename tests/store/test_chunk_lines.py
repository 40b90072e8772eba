"""Each chunk's lines (and a PDF's pages) are stored with it: counted by one pass over the
text, written by either store's writer, and filled in by the migration for an index written
before they were kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.records import DIM, IDENTITY

from pocketmcp.core.text import has_pages, places, sha256
from pocketmcp.store import lines
from pocketmcp.store.api import Place
from pocketmcp.store.sqlite import schema
from pocketmcp.store.sqlite.connect import open_sync_writer
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.writes import SqliteWriter


def _counted(text: str, start: int, end: int) -> tuple[int, int, int, int]:
    """Lines and pages of a stretch's first and last character that is not white space,
    by counting from the start of the text."""
    inked = [i for i in range(start, min(end, len(text))) if not text[i].isspace()]
    first, last = (inked[0], inked[-1]) if inked else (start, max(start, end - 1))
    return (text.count("\n", 0, first) + 1, text.count("\n", 0, last) + 1,
            text.count("\f", 0, first) + 1, text.count("\f", 0, last) + 1)


def test_lines_and_pages_of_overlapping_stretches_are_counted_in_one_pass() -> None:
    text = "one\ntwo\nthree\n\f\nfour\nfive\n\f"
    spans = [(0, 7), (4, 14), (8, 22), (13, len(text)), (9, 9), (13, 16)]
    # Leading and trailing white space (line ends, a page's end) are not where it lies.
    assert places(text, spans, pages=True) == [(1, 2, 1, 1), (2, 3, 1, 1), (3, 6, 1, 2),
                                               (5, 6, 2, 2), (3, 3, 1, 1), (3, 4, 1, 2)]
    assert places(text, spans[:1], pages=False) == [(1, 2, None, None)]
    assert has_pages("file:log.PDF", "file", text)
    assert not has_pages("file:log.pdf", "file", "no page ends")  # converted before
    assert not has_pages("file:notes.md", "file", text)
    assert not has_pages("doc.pdf", "raw", text)


@given(st.text(alphabet="ab\n\f", max_size=60), st.lists(st.tuples(
    st.integers(0, 60), st.integers(0, 60)), max_size=8))
def test_each_stretch_gets_the_lines_a_count_from_the_start_gives(
        text: str, pairs: list[tuple[int, int]]) -> None:
    spans = [(min(a, b, len(text)), min(max(a, b), len(text))) for a, b in pairs]
    assert places(text, spans, pages=True) == [_counted(text, s, e) for s, e in spans]


def _before_lines(module: Any) -> int:
    """The schema version before the one that added the chunks' lines."""
    return next(i for i, steps in enumerate(module.MIGRATIONS) if module._chunk_lines in steps)


def _old_index(db: Path, docs: dict[str, tuple[str, list[tuple[int, int]]]]) -> None:
    """An index as the schema before lines left it: documents and waiting chunks."""
    conn = open_sync_writer(db)
    for migration in schema.MIGRATIONS[:_before_lines(schema)]:
        for step in migration:
            conn.execute(step.replace("{dim}", str(DIM))) if isinstance(step, str) else step(conn)
    for ext, (content, spans) in docs.items():
        doc_id = conn.execute(
            "INSERT INTO documents(external_id, source, title, content, content_sha256, "
            "chunk_count, created_at, updated_at) VALUES (?, 'file', ?, ?, ?, ?, 'x', 'x') "
            "RETURNING doc_id", (ext, ext, content, sha256(content), len(spans))).fetchone()[0]
        conn.executemany(
            "INSERT INTO chunks(doc_id, idx, start_off, end_off, tokens, text_sha256, waiting) "
            "VALUES (?, ?, ?, ?, 1, ?, 1)",
            [(doc_id, i, s, e, sha256(content[s:e])) for i, (s, e) in enumerate(spans)])
    conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                     list(IDENTITY.meta().items()))
    conn.execute(f"PRAGMA user_version = {_before_lines(schema)}")
    conn.close()


OLD = {"file:notes/a.md": ("# A\n\nfirst\nsecond\nthird\n", [(0, 12), (5, 24)]),
       "file:log.pdf": ("page one\n\f\npage two\nmore\n\f", [(0, 11), (9, 26)])}
LINES = {("file:notes/a.md", 0): [1, 4, None, None], ("file:notes/a.md", 1): [3, 5, None, None],
         ("file:log.pdf", 0): [1, 1, 1, 1], ("file:log.pdf", 1): [3, 4, 2, 2]}


def test_the_migration_fills_in_the_lines_of_chunks_written_before(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    _old_index(db, OLD)
    SqliteWriter(db, IDENTITY).close()  # migrates
    reader = SqliteReader(db)
    try:
        got = {(ext, idx): row for ext, idx, *row in reader.query(
            "SELECT d.external_id, c.idx, c.start_line, c.end_line, c.start_page, "
            "c.end_page FROM chunks c JOIN documents d USING (doc_id)")}
        assert got == LINES
    finally:
        reader.close()


@pytest.mark.parametrize("where", ["postgres"], indirect=True)
def test_a_postgres_index_written_before_lines_gets_them(
        where: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.store.pg import connect
    from pocketmcp.store.pg import schema as pg_schema
    from pocketmcp.store.pg.place import PgPlace

    assert isinstance(where, PgPlace)
    with monkeypatch.context() as patch:  # the index as the schema before lines made it
        before = _before_lines(pg_schema)
        patch.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:before])
        patch.setattr(pg_schema, "SCHEMA_VERSION", before)
        where.writer(IDENTITY).close()
    with connect.connect(where, autocommit=True) as conn:
        for ext, (content, spans) in OLD.items():
            row = conn.execute(
                b"INSERT INTO documents(external_id, source, content, content_sha256, "
                b"chunk_count, created_at, updated_at) VALUES (%s, 'file', %s, 'x', %s, 'x', "
                b"'x') RETURNING doc_id", (ext, content, len(spans))).fetchone()
            assert row is not None
            for i, (s, e) in enumerate(spans):
                conn.execute(b"INSERT INTO chunks(doc_id, idx, start_off, end_off, tokens, "
                             b"text_sha256, words, embedding) VALUES (%s, %s, %s, %s, 1, 'x', 'x', "
                             b"NULL)",
                             (row[0], i, s, e))
    where.writer(IDENTITY).close()  # migrates
    with connect.connect(where, autocommit=True) as conn:
        got = {(ext, idx): list(rest) for ext, idx, *rest in conn.execute(
            b"SELECT d.external_id, c.idx, c.start_line, c.end_line, c.start_page, c.end_page "
            b"FROM chunks c JOIN documents d USING (doc_id)").fetchall()}
    assert got == LINES
    assert lines.COLUMNS == ("start_line", "end_line", "start_page", "end_page")
