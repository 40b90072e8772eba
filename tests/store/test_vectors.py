"""The vector file against exact search, following the database's changes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite import schema
from pocketmcp.store.sqlite.connect import open_sync_writer
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.vectors import index as vector_index
from pocketmcp.store.sqlite.vectors.index import VectorIndex
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 64


def _clustered(n: int, seed: int, dim: int = DIM) -> np.ndarray:
    """Unit vectors in clusters around a shared direction, like sentence embeddings."""
    rng = np.random.default_rng(seed)
    common = rng.normal(size=dim)
    centres = rng.normal(size=(max(1, n // 200), dim)) + 2 * common
    rows = centres[rng.integers(0, len(centres), n)] + rng.normal(size=(n, dim)) * 0.8
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _add_docs(writer: SqliteWriter, vectors: np.ndarray, per_doc: int, start: int = 0) -> None:
    writer.begin()
    for d in range(len(vectors) // per_doc):
        block = vectors[d * per_doc:(d + 1) * per_doc]
        chunks = tuple(Chunk(idx=i, start=i, end=i + 1, text=f"d{start + d}c{i}", tokens=3,
                             sha256=sha256(f"d{start + d}c{i}")) for i in range(per_doc))
        writer.upsert(DocRecord(external_id=f"d{start + d}", source="raw", uri=None,
                                title="", content="x" * per_doc, sha256=f"{start + d}"),
                      chunks, block.tobytes())
    writer.commit()


def _recall(index: VectorIndex, reader: SqliteReader, vectors: np.ndarray,
            queries: np.ndarray, k: int = 10) -> float:
    ids, _, _ = reader.vectors_by_ids(list(range(1, len(vectors) + 1)), vectors.shape[1])
    found = 0
    for q in queries:
        exact = set(ids[np.argsort(-(vectors @ q))[:k]].tolist())
        got, _, _ = index.search(reader.log, q, k, candidates=200)
        found += len(exact & set(got.tolist()))
    return found / (k * len(queries))


@contextmanager
def indexed(db: Path, vectors: np.ndarray, per_doc: int
            ) -> Iterator[tuple[SqliteWriter, SqliteReader, VectorIndex]]:
    """A writer holding `vectors`, a reader, and a vector index synced with it."""
    writer = SqliteWriter(db, Identity(model="m", dim=vectors.shape[1]))
    _add_docs(writer, vectors, per_doc=per_doc)
    reader = SqliteReader(db)
    index = VectorIndex(db, vectors.shape[1])
    try:
        index.sync(reader.log)
        yield writer, reader, index
    finally:
        index.close()
        reader.close()
        writer.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "index.db"


def test_two_pass_search_finds_what_exact_search_finds(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the exact scan's limit (lowered, so the corpus is built within a second): both
    # passes run.
    monkeypatch.setattr(vector_index, "EXACT_SCAN_LIMIT", 1024)
    n, dim = 4 * vector_index.EXACT_SCAN_LIMIT, 384  # the model's dimension
    vectors = _clustered(n, seed=1, dim=dim)
    with indexed(db, vectors, per_doc=8) as (_, reader, index):
        assert index.live == n
        # Queries resemble the corpus, as real ones resemble the documents they look for.
        rng = np.random.default_rng(2)
        queries = vectors[rng.integers(0, n, 50)] + rng.normal(0, 0.02, (50, dim))
        queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
        assert _recall(index, reader, vectors, queries) >= 0.98


def test_the_row_copy_for_faiss_follows_appended_rows_and_finds_what_numpy_finds(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_index, "EXACT_SCAN_LIMIT", 1024)  # as above
    n, dim = 4 * vector_index.EXACT_SCAN_LIMIT, 384
    vectors = _clustered(n, seed=6, dim=dim)
    first = n - 800
    with indexed(db, vectors[:first], per_doc=8) as (writer, reader, index):
        queries = vectors[::997] + 0.01
        index.search(reader.log, queries[0], 10, candidates=200)
        cols = index._cols
        assert cols is not None
        deadline = time.monotonic() + 30
        while cols.rowcodes is None:  # made in the background when the file is mapped
            assert time.monotonic() < deadline, "no row copy"
            time.sleep(0.01)
        assert cols.rowcodes.rows == first
        _add_docs(writer, vectors[first:], per_doc=8, start=first // 8)
        index.sync(reader.log)
        assert index._cols is cols and index.live == n
        with_copy = [index.search(reader.log, q, 10, candidates=200) for q in queries]
        assert cols.rowcodes.rows == n  # extended by the searches
        cols.rowcodes = None
        without = [index.search(reader.log, q, 10, candidates=200) for q in queries]
        for (ids, scores, _), (ids2, scores2, _) in zip(with_copy, without, strict=True):
            assert ids.tolist() == ids2.tolist()
            assert np.array_equal(scores, scores2)


def test_the_index_follows_deletes_and_additions(db: Path) -> None:
    vectors = _clustered(2000, seed=3)
    with indexed(db, vectors[:1000], per_doc=10) as (writer, reader, index):
        target = vectors[5]  # chunk 6 of document d0
        ids, _, _ = index.search(reader.log, target, 1, candidates=100)
        assert ids.tolist() == [6]
        writer.begin()
        writer.delete("d0")
        writer.commit()
        index.sync(reader.log)
        ids, _, _ = index.search(reader.log, target, 5, candidates=100)
        assert not set(ids.tolist()) & set(range(1, 11))
        _add_docs(writer, vectors[1000:], per_doc=10, start=100)
        index.sync(reader.log)
        assert index.live == 1990
        ids, _, _ = index.search(reader.log, vectors[1500], 1, candidates=100)
        assert ids.tolist() == [1501]


def test_a_reader_far_behind_the_trimmed_log_reloads(db: Path) -> None:
    vectors = _clustered(400, seed=4)
    with indexed(db, vectors[:200], per_doc=10) as (writer, reader, index):
        _add_docs(writer, vectors[200:], per_doc=10, start=50)
        writer._sql("DELETE FROM chunk_log")  # as the writer's trimming would, much later
        index.sync(reader.log)
        assert index.live == 400
        ids, _, _ = index.search(reader.log, vectors[399], 1, candidates=50)
        assert ids.tolist() == [400]


def test_filters_keep_only_the_allowed_documents(db: Path) -> None:
    vectors = _clustered(500, seed=5)
    with indexed(db, vectors, per_doc=5) as (_, _reader, index):
        ids, _, _ = index.search(_reader.log, vectors[0], 10, candidates=100,
                                 allowed_docs=[7, 9])
        # k results come back when k exist among the allowed documents.
        assert sorted(ids.tolist()) == list(range(31, 36)) + list(range(41, 46))


def test_an_index_from_schema_1_is_migrated_with_its_chunks_searchable(db: Path) -> None:
    conn = open_sync_writer(db)
    for statement in schema.MIGRATIONS[0]:
        conn.execute(statement.replace("{dim}", str(DIM)))
    conn.execute("INSERT INTO meta VALUES ('model_id', 'm'), ('dim', ?)", (str(DIM),))
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO documents(external_id, source, title, content, content_sha256, "
                 "created_at, updated_at) VALUES ('old', 'raw', 'Ancient', 'x', 's', '', '')")
    conn.execute("INSERT INTO chunks VALUES (1, 1, 0, 0, 1, 3, 'h')")
    conn.execute("INSERT INTO vec_chunks(chunk_id, embedding, doc_id, idx, start_off, end_off, "
                 "text) VALUES (1, ?, 1, 0, 0, 1, 'papyrus scrolls')",
                 (_clustered(1, seed=6).tobytes(),))
    conn.close()
    SqliteWriter(db, Identity(model="m", dim=DIM)).close()
    reader = SqliteReader(db)
    try:
        assert reader.search_keyword('"papyrus"', 5) != []
        assert reader.search_keyword('"ancient"', 5) != []  # the title is indexed too
        assert reader.search_documents('"papyrus"', 5) == []  # content "x" only
        assert reader.search_documents('"ancient"', 5) == [(1, pytest.approx(
            reader.search_documents('"ancient"', 5)[0][1]))]
        index = VectorIndex(db, DIM)
        index.sync(reader.log)
        assert index.live == 1
        index.close()
    finally:
        reader.close()
