"""Document facts in the store: the migration that fills them in, how writes keep them, and
the filters that run on them inside SQL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocFacts, DocRecord, Link
from pocketmcp.store.filters import Compare, DocFilter
from pocketmcp.store.sqlite import schema
from pocketmcp.store.sqlite.connect import open_sync_writer
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 64
NOTE = "---\ntags: [plan]\nupdated: 2024-03-05\n---\n# Plan\n\nSee [[Budget]] #money\n"


def _version_4(db: Path) -> None:
    """An index as schema 4 left it, with a note, a PDF's text and a raw document."""
    conn = open_sync_writer(db)
    for migration in schema.MIGRATIONS[:4]:
        for step in migration:
            conn.execute(step.replace("{dim}", str(DIM))) if isinstance(step, str) else step(conn)
    rows = [("file:notes/plan.md", "file", NOTE, 1_700_000_000_000_000_000),
            ("file:budget.md", "file", "# Budget\n\nNumbers.", None),
            ("file:paper.pdf", "file", "# A paper\n\nText with #nottag in it.", None),
            ("standup", "raw", "Standup notes #daily", None)]
    for ext, source, content, mtime in rows:
        conn.execute("INSERT INTO documents(external_id, source, title, content, content_sha256,"
                     " mtime_ns, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (ext, source, ext, content, sha256(content), mtime,
                      "2023-01-01T00:00:00.000Z", "2023-01-02T00:00:00.000Z"))
    conn.execute("INSERT INTO meta VALUES ('model_id', 'm'), ('dim', ?)", (str(DIM),))
    conn.execute("PRAGMA user_version = 4")
    conn.close()


def test_migration_5_fills_in_the_facts_of_documents_indexed_before(tmp_path: Path) -> None:
    db = tmp_path / "index.db"
    _version_4(db)
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    reader = SqliteReader(db)
    try:
        got = {r[0]: r[1:] for r in reader.query(
            "SELECT external_id, tags, created, modified, properties FROM documents")}
        assert got["file:notes/plan.md"] == (
            '["plan", "money"]', "2024-03-05", "2024-03-05",
            '{"tags": ["plan"], "updated": "2024-03-05"}')
        # Without dates of its own: the file's time, else when it was written.
        assert got["file:budget.md"][1:3] == ("2023-01-02T00:00:00.000Z",) * 2
        assert got["file:paper.pdf"][0] == "[]"  # converted text is not read as a note
        assert got["standup"][0] == '["daily"]'
        plan = reader.document_by_external("file:notes/plan.md")
        budget = reader.document_by_external("file:budget.md")
        assert plan is not None and budget is not None
        [link] = reader.outgoing_links(plan.doc_id)
        assert (link.target, link.doc_id) == ("Budget", budget.doc_id)
        assert [d.doc_id for d in reader.incoming_links(budget.doc_id)] == [plan.doc_id]
        assert reader.doc_ids_where(DocFilter(tags_any=("PLAN",))) == [plan.doc_id]
    finally:
        reader.close()


def _write(writer: SqliteWriter, ext: str, facts: DocFacts, metadata: dict | None = None,
           text: str | None = None) -> int:
    text = text or f"Text of {ext}."
    chunk = Chunk(idx=0, start=0, end=len(text), text=text, tokens=5, sha256=sha256(text))
    vector = np.ones(DIM, np.float32) / 8
    with writer.transaction():
        return writer.upsert(DocRecord(external_id=ext, source="raw", uri=None, title=ext,
                                       content=text, sha256=sha256(text),
                                       metadata=metadata or {}, facts=facts),
                             (chunk,), vector.tobytes()).doc_id


def test_filters_select_documents_inside_sql(tmp_path: Path) -> None:
    writer = SqliteWriter(tmp_path / "index.db", Identity(model="m", dim=DIM))
    try:
        a = _write(writer, "a", DocFacts(tags=("project/apollo", "draft"),
                                         properties={"priority": 3, "owner": ["ann", "bo"]},
                                         modified="2024-03-05T10:00:00.000Z",
                                         created="2024-01-01"))
        b = _write(writer, "b", DocFacts(tags=("project",), properties={"priority": 1},
                                         modified="2024-02-01", created="2024-02-01"),
                   metadata={"priority": 5, "tags": ["extra"]})
        c = _write(writer, "c", DocFacts(tags=("projects",), properties={"due": "2024-06-01"},
                                         modified="2024-03-06", created="2024-03-06"))
    finally:
        writer.close()
    reader = SqliteReader(tmp_path / "index.db")

    def ids(**kw: object) -> list[int]:
        return reader.doc_ids_where(DocFilter(**kw))  # type: ignore[arg-type]

    try:
        assert ids(tags_any=("project",)) == [a, b]  # a tag matches the tags below it
        assert ids(tags_any=("extra",)) == [b]  # a tool's `tags` metadata counts
        assert ids(tags_all=("project", "draft")) == [a]
        assert ids(modified_after="2024-03-05") == [a, c]
        assert ids(modified_before="2024-03-05") == [b]
        assert ids(created_after="2024-02-01", created_before="2024-03-06") == [b]
        # The tool's metadata wins over the document's own properties.
        assert ids(metadata=(Compare("priority", "gte", 3),)) == [a, b]
        assert ids(metadata=(Compare("priority", "in", (1, 3)),)) == [a]
        assert ids(metadata=(Compare("owner", "eq", "bo"),)) == [a]  # any item of a list
        assert ids(metadata=(Compare("due", "lt", "2024-07-01"),)) == [c]
        assert ids(metadata=(Compare("due", "exists", False),)) == [a, b]
        assert ids(doc_ids=(a, c), tags_any=("projects",)) == [c]
    finally:
        reader.close()


def test_a_rewrite_with_the_same_text_keeps_chunks_and_updates_only_changed_facts(
    tmp_path: Path
) -> None:
    writer = SqliteWriter(tmp_path / "index.db", Identity(model="m", dim=DIM))
    try:
        facts = DocFacts(tags=("a",), links=(Link("X", "x", "wiki"),))
        doc = _write(writer, "n", facts)
        reader = SqliteReader(tmp_path / "index.db")
        first = reader.query("SELECT chunk_id FROM chunks")
        modified = reader.query("SELECT modified FROM documents")[0][0]
        assert modified is not None
        _write(writer, "n", facts)  # unchanged: its dates stay
        assert reader.query("SELECT modified FROM documents")[0][0] == modified
        _write(writer, "n", DocFacts(tags=("b",)))
        assert reader.query("SELECT chunk_id FROM chunks") == first
        assert json.loads(reader.query("SELECT tags FROM documents")[0][0]) == ["b"]
        assert reader.outgoing_links(doc) == []
        with writer.transaction():
            writer.delete("n")
        for table in ("doc_tags", "links", "doc_keys"):
            assert reader.query(f"SELECT count(*) FROM {table}") == [(0,)]
        reader.close()
    finally:
        writer.close()
