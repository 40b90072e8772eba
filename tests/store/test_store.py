from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.records import DIM, unit_vectors
from support.records import chunks as _chunks
from support.records import doc as _doc

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.errors import ModelMismatchError, StoreError, WriterBusyError
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite import schema
from pocketmcp.store.sqlite.connect import sqlite_module
from pocketmcp.store.sqlite.keywords.textsearch import TermCounts
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.writes import SqliteWriter


def _vectors(n: int, seed: int = 0) -> bytes:
    return unit_vectors(n, seed).tobytes()


def _rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite_module().connect(str(db))
    try:
        sqlite_module_vec(conn)
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def sqlite_module_vec(conn) -> None:
    import sqlite_vec

    conn.enable_load_extension(True)
    sqlite_vec.load(conn)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sub" / "index.db"


def test_a_new_index_is_migrated_in_wal_mode_and_records_its_model(db: Path) -> None:
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    assert _rows(db, "PRAGMA user_version") == [(schema.SCHEMA_VERSION,)]
    assert _rows(db, "PRAGMA journal_mode") == [("wal",)]
    reader = SqliteReader(db)
    try:
        assert reader.identity() == Identity(model="m", dim=DIM)
    finally:
        reader.close()


def test_an_index_records_its_provider_and_prefixes_and_refuses_others_saying_what_differs(
    db: Path
) -> None:
    nomic = Identity(provider="ollama", model="nomic-embed-text", dim=DIM,
                     doc_prefix="search_document: ", query_prefix="search_query: ")
    SqliteWriter(db, nomic).close()
    assert dict(_rows(db, "SELECT key, value FROM meta"))["doc_prefix"] == "search_document: "
    SqliteWriter(db, nomic).close()  # the same again opens
    other = Identity(provider="openai", model="nomic-embed-text", dim=DIM,
                     doc_prefix="", query_prefix="search_query: ")
    with pytest.raises(ModelMismatchError) as caught:
        SqliteWriter(db, other)
    message = str(caught.value)
    assert caught.value.differences == [
        "provider 'ollama' in the index, 'openai' configured",
        "document prefix 'search_document: ' in the index, none configured"]
    assert "--rebuild" in message and "SQLITE_PATH" in message and "EMBED_DOC_PREFIX" in message


def test_an_index_made_before_providers_opens_with_the_built_in_model_and_records_the_rest(
    db: Path
) -> None:
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    conn = sqlite_module().connect(str(db))
    conn.execute("DELETE FROM meta WHERE key NOT IN ('model_id', 'dim')")  # as it was then
    conn.commit()
    conn.close()
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    meta = dict(_rows(db, "SELECT key, value FROM meta"))
    assert meta.pop("vectors_token")  # names the database for its vector file
    assert meta == {"model_id": "m", "dim": str(DIM), "provider": "local", "doc_prefix": "",
                    "query_prefix": "", "input_type": ""}


def test_opening_with_another_model_says_how_to_rebuild(db: Path) -> None:
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    with pytest.raises(ModelMismatchError, match="--rebuild") as caught:
        SqliteWriter(db, Identity(model="other", dim=16))
    assert "'m'" in str(caught.value) and "'other'" in str(caught.value)
    SqliteWriter(db, Identity(model="other", dim=16), rebuild=True).close()
    reader = SqliteReader(db)
    try:
        assert reader.identity() == Identity(model="other", dim=16)
    finally:
        reader.close()


@pytest.mark.usefixtures("processes")
def test_only_one_writer_holds_an_index(db: Path) -> None:
    first = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        with pytest.raises(WriterBusyError):
            SqliteWriter(db, Identity(model="m", dim=DIM))
        probe = subprocess.run(
            [sys.executable, "-c",
             "import sys; from pathlib import Path; from pocketmcp.store.sqlite.writes import "
             "SqliteWriter; from pocketmcp.core.identity import Identity\ntry:\n "
             "SqliteWriter(Path(sys.argv[1]), Identity(model='m', dim=8))\n"
             "except Exception as e: print(type(e).__name__)", str(db)],
            capture_output=True, text=True, check=True,
        )
        assert probe.stdout.strip() == "WriterBusyError"
    finally:
        first.close()
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()


def test_readers_see_how_far_the_writers_first_scan_has_come(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    reader = SqliteReader(db)
    try:
        assert reader.scan_done()  # an index that never recorded a scan counts as scanned
        writer.record_scan("running")
        assert not reader.scan_done()
        writer.record_scan("done")
        assert reader.scan_done()
    finally:
        reader.close()
        writer.close()


def test_readers_cannot_write(db: Path) -> None:
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    reader = SqliteReader(db)
    try:
        with pytest.raises((sqlite3.Error, sqlite_module().Error)):
            reader._conn.execute("DELETE FROM documents")
    finally:
        reader.close()


def test_a_reader_needs_an_existing_index(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="pocketmcp index"):
        SqliteReader(tmp_path / "missing.db")


def test_upsert_replaces_chunks_and_vectors_together(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.begin()
        first = writer.upsert(_doc("d", "abc"), _chunks("a", "b", "c"), _vectors(3))
        writer.commit()
        assert (first.status, first.chunks) == ("inserted", 3)
        writer.begin()
        second = writer.upsert(_doc("d", "xy"), _chunks("x", "y"), _vectors(2, seed=1))
        writer.commit()
        assert (second.status, second.chunks_removed, second.doc_id) == ("updated", 3,
                                                                         first.doc_id)
        writer.begin()
        same = writer.upsert(_doc("d", "xy"), _chunks("x", "y"), _vectors(2, seed=1))
        writer.commit()
        assert same.status == "unchanged"
    finally:
        writer.close()
    assert _rows(db, "SELECT count(*) FROM chunks") == [(2,)]
    assert _rows(db, "SELECT count(*) FROM vec_chunks") == [(2,)]
    assert sorted(_rows(db, "SELECT text FROM vec_chunks")) == [("x",), ("y",)]


def test_delete_removes_the_document_its_chunks_and_vectors(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.begin()
        writer.upsert(_doc("d", "ab"), _chunks("a", "b"), _vectors(2))
        writer.upsert(_doc("e", "c"), _chunks("c"), _vectors(1))
        writer.commit()
        writer.begin()
        assert writer.delete("d") is not None
        assert writer.delete("missing") is None
        writer.commit()
    finally:
        writer.close()
    assert _rows(db, "SELECT external_id FROM documents") == [("e",)]
    assert _rows(db, "SELECT count(*) FROM chunks") == [(1,)]
    assert _rows(db, "SELECT count(*) FROM vec_chunks") == [(1,)]


def test_vectors_are_found_by_chunk_text(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    vectors = _vectors(2)
    try:
        writer.begin()
        writer.upsert(_doc("d", "ab"), _chunks("alpha", "beta"), vectors)
        writer.commit()
    finally:
        writer.close()
    reader = SqliteReader(db)
    try:
        found = reader.vectors_for([sha256("beta"), sha256("gamma")])
    finally:
        reader.close()
    assert list(found) == [sha256("beta")]
    assert found[sha256("beta")] == vectors[DIM * 4:]


def test_a_failed_batch_leaves_nothing_behind(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.begin()
        writer.upsert(_doc("d", "ab"), _chunks("a", "b"), _vectors(2))
        with pytest.raises(StoreError):
            writer.upsert(_doc("e", "c"), _chunks("c"), b"short")
        writer.rollback()
    finally:
        writer.close()
    assert _rows(db, "SELECT count(*) FROM documents") == [(0,)]
    assert _rows(db, "SELECT count(*) FROM vec_chunks") == [(0,)]


def _undo_migration_9(conn) -> None:
    """Take out what schema 9 added (vectors of removed chunks, kept a while)."""
    conn.execute("DROP TABLE kept_vectors")


def _undo_migration_8(conn) -> None:
    """Take out what schema 8 added (each chunk's lines and pages)."""
    for column in ("start_line", "end_line", "start_page", "end_page"):
        conn.execute(f"ALTER TABLE chunks DROP COLUMN {column}")


def _undo_migration_7(conn) -> None:
    """Take out what schema 7 added (a waiting chunk given its vector in place, logged)."""
    conn.execute("DROP TRIGGER chunk_embedded")


def _undo_migration_6(conn) -> None:
    """Take out what schema 6 added (chunks that wait for vectors), as an older file lacks
    it."""
    conn.execute("DROP TABLE embed_queue")
    conn.execute("DROP INDEX chunks_waiting")
    conn.execute("DROP TRIGGER chunk_added")
    conn.execute("DROP TRIGGER chunk_removed")
    conn.execute("ALTER TABLE chunks DROP COLUMN waiting")
    conn.execute("CREATE TRIGGER chunk_added AFTER INSERT ON chunks BEGIN INSERT INTO "
                 "chunk_log(chunk_id, added) VALUES (new.chunk_id, 1); END")
    conn.execute("CREATE TRIGGER chunk_removed AFTER DELETE ON chunks BEGIN INSERT INTO "
                 "chunk_log(chunk_id, added) VALUES (old.chunk_id, 0); END")


def _undo_migration_5(conn) -> None:
    """Take out what schema 5 added (document facts), as an older file lacks it."""
    for table in ("doc_tags", "links", "doc_keys"):
        conn.execute(f"DROP TABLE {table}")
    for index in ("documents_modified", "documents_created"):
        conn.execute(f"DROP INDEX {index}")
    for column in ("properties", "tags", "created", "modified"):
        conn.execute(f"ALTER TABLE documents DROP COLUMN {column}")


def test_migration_4_reindexes_cjk_rows_as_bigrams_and_leaves_others_alone(db: Path) -> None:
    ja = "東京都に行きました。京都にも行きたい。"
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    writer.begin()
    ja_id = writer.upsert(DocRecord(external_id="ja", source="raw", uri=None, title="旅行メモ",
                                    content=ja, sha256=sha256(ja)),
                          (Chunk(idx=0, start=0, end=8, text=ja[:8], tokens=5, sha256="a"),
                           Chunk(idx=1, start=8, end=len(ja), text=ja[8:], tokens=5,
                                 sha256="b", section="旅行メモ > 京都")), _vectors(2)).doc_id
    writer.upsert(_doc("en", "plain english papyrus"), _chunks("plain english papyrus"),
                  _vectors(1, seed=1))
    writer.commit()
    writer.close()
    # Make it a version 3 file: its keyword rows as unicode61 alone tokenized them.
    conn = sqlite_module().connect(str(db), isolation_level=None)
    sqlite_module_vec(conn)
    for doc_id, title, content in conn.execute(
            "SELECT doc_id, title, content FROM documents").fetchall():
        conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        conn.execute("INSERT INTO documents_fts(rowid, title, content) VALUES (?, ?, ?)",
                     (doc_id, title, content))
    for chunk_id, head, text in conn.execute(
            "SELECT c.chunk_id, coalesce(nullif(c.section, ''), d.title), v.text FROM chunks c "
            "JOIN documents d USING (doc_id) JOIN vec_chunks v USING (chunk_id)").fetchall():
        conn.execute("DELETE FROM chunks_fts WHERE rowid = ?", (chunk_id,))
        conn.execute("INSERT INTO chunks_fts(rowid, title, text) VALUES (?, ?, ?)",
                     (chunk_id, head, text))
    _undo_migration_9(conn)
    _undo_migration_8(conn)
    _undo_migration_7(conn)
    _undo_migration_6(conn)
    _undo_migration_5(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.close()
    reader = SqliteReader(db)
    try:
        assert reader.search_keyword('"東京"', 5) == []
        assert reader.search_documents('"東京"', 5) == []
        assert reader.term_docs(["東京都に行きまし"]) == {"東京都に行きまし": 1}
    finally:
        reader.close()

    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    assert _rows(db, "PRAGMA user_version") == [(schema.SCHEMA_VERSION,)]
    reader = SqliteReader(db)
    try:
        assert [r[2] for r in reader.search_keyword('"東京"', 5)] == [ja_id]
        # 京都 is in both chunks: in the first as part of 東京都 (see core/cjk.py).
        assert sorted(r[2] for r in reader.search_keyword('"京都"', 5)) == [ja_id, ja_id]
        assert [r[0] for r in reader.search_documents('"京都"', 5)] == [ja_id]
        assert [r[0] for r in reader.search_documents('"旅行 行メ メモ"', 5)] == [ja_id]
        assert reader.term_docs(["東京都に行きまし", "京都", "旅行", "papyru"]) == {
            "京都": 2, "旅行": 2, "papyru": 1}
        assert len(reader.search_keyword('"papyrus"', 5)) == 1
    finally:
        reader.close()


@pytest.mark.usefixtures("processes")
def test_the_writer_lock_is_released_from_another_thread_than_took_it(tmp_path: Path) -> None:
    import threading

    db = tmp_path / "index.db"
    opened: list[SqliteWriter] = []
    taker = threading.Thread(target=lambda: opened.append(
        SqliteWriter(db, Identity(model="m", dim=DIM))))
    taker.start()
    taker.join()
    opened[0].close()  # here, not in the thread that took the lock
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from filelock import FileLock; "
         "FileLock(sys.argv[1], blocking=False).acquire(); print('free')",
         str(db) + ".writer.lock"], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "free", probe.stderr[-500:]


def test_term_counts_are_remembered_by_a_pools_readers_until_chunks_change(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []
    count = SqliteReader._count_terms
    monkeypatch.setattr(SqliteReader, "_count_terms",
                        lambda self, terms: asked.append(list(terms)) or count(self, terms))
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    shared = TermCounts()
    one, two = SqliteReader(db, shared), SqliteReader(db, shared)
    try:
        writer.begin()
        writer.upsert(_doc("d1", "apple pear"), _chunks("apple pear", "apple"), _vectors(2))
        writer.commit()
        assert one.term_docs(["appl", "pear", "plum"]) == {"appl": 2, "pear": 1}
        assert two.term_docs(["pear", "appl", "plum"]) == {"appl": 2, "pear": 1}
        assert two.term_docs(["plum", "fig"]) == {}
        assert asked == [["appl", "pear", "plum"], ["fig"]]
        writer.begin()
        writer.upsert(_doc("d2", "plum"), _chunks("plum"), _vectors(1))
        writer.commit()
        assert one.term_docs(["plum", "appl"]) == {"plum": 1, "appl": 2}
        writer.begin()
        writer.delete("d1")
        writer.commit()
        assert two.term_docs(["plum", "appl"]) == {"plum": 1}
        assert asked[2:] == [["plum", "appl"], ["plum", "appl"]]
    finally:
        one.close()
        two.close()
        writer.close()


def test_a_large_keyword_query_run_in_two_halves_returns_what_the_whole_query_does(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.store.sqlite import halves

    words = ["owl", "night", "hunt", "silent", "flight", "mouse", "barn", "forest"]
    rng = np.random.default_rng(3)
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        with writer.transaction():
            for d in range(40):
                texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 12))))
                         for _ in range(5)]
                writer.upsert(_doc(f"d{d}", "".join(texts)), _chunks(*texts), _vectors(5, d))
    finally:
        writer.close()
    match = '"owl" OR "silent" OR "barn"'
    helpers = Threads(1, "pocketmcp.fts")
    reader = SqliteReader(db, helpers=helpers)
    try:
        whole = reader.search_keyword(match, 30)
        monkeypatch.setattr(halves, "SPLIT_POSTINGS", 10)
        halves = reader.search_keyword(match, 30, postings=10)
        assert reader._second is not None  # the halves ran, on two connections
        assert whole == halves and len(whole) == 30
        assert [s for _, s, _ in whole] == sorted((s for _, s, _ in whole), reverse=True)
        assert reader.search_keyword(match, 500, postings=10) == reader.search_keyword(
            match, 500)  # every match: both halves whole
        # A query restricted to some documents is never split.
        some = reader.search_keyword(match, 30, [1, 2, 3], postings=10)
        assert some and {doc for _, _, doc in some} <= {1, 2, 3}
        # Once its helpers are closed, a split query runs whole, on the reader's thread.
        helpers.close()
        assert reader.search_keyword(match, 30, postings=10) == whole
    finally:
        reader.close()
        helpers.close()
