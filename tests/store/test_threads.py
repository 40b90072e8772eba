"""The threads an index starts for its searches are its own: closing it stops them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.errors import StoreError
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite import halves
from pocketmcp.store.sqlite.keywords.lengths import ChunkLengths
from pocketmcp.store.sqlite.reads import SqliteIndex
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.vectors import index as vector_index
from pocketmcp.store.sqlite.vectors import scan
from pocketmcp.store.sqlite.vectors.file import open_columns, vectors_path
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 32
DOCS, PER_DOC = 300, 10


def _unit(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)) + 0.5
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An index of DOCS * PER_DOC chunks, every one of them about owls."""
    path = tmp_path / "index.db"
    words = ["owl", "night", "hunt", "silent", "flight", "mouse", "barn", "forest"]
    rng = np.random.default_rng(1)
    vectors = _unit(DOCS * PER_DOC, seed=2)
    writer = SqliteWriter(path, Identity(model="m", dim=DIM))
    try:
        with writer.transaction():
            for d in range(DOCS):
                texts = ["owl " + " ".join(rng.choice(words, size=6)) for _ in range(PER_DOC)]
                chunks, start = [], 0
                for i, text in enumerate(texts):
                    chunks.append(Chunk(idx=i, start=start, end=start + len(text), text=text,
                                        tokens=7, sha256=sha256(text)))
                    start += len(text)
                content = "".join(texts)
                writer.upsert(DocRecord(external_id=f"d{d}", source="raw", uri=None,
                                        title=f"d{d}", content=content, sha256=sha256(content)),
                              tuple(chunks),
                              vectors[d * PER_DOC:(d + 1) * PER_DOC].tobytes())
    finally:
        writer.close()
    return path


def _ours() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("pocketmcp.")}


def _still_alive(threads: set[threading.Thread], seconds: float) -> list[str]:
    """The names of those of `threads` still alive after waiting up to `seconds` in all."""
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return sorted(t.name for t in threads if t.is_alive())


async def test_closing_an_index_stops_every_thread_its_searches_started(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small enough sizes that this index's searches take the paths a large one takes.
    monkeypatch.setattr(scan, "PARALLEL_ROWS", 1000)  # vector passes over two threads
    monkeypatch.setattr(vector_index, "EXACT_SCAN_LIMIT", 100)  # all three passes
    monkeypatch.setattr(halves, "SPLIT_POSTINGS", 10)  # chunk queries in two halves
    before = _ours()
    index = SqliteIndex(db, DIM)
    try:
        assert _ours() == before  # no thread before a search needs one
        await index.open_vectors()  # the warm-up and the lengths' read start
        query = _unit(1, seed=3)[0]
        ids, _, _ = await index.run(lambda r: index.nearest(r, query, 10, 50, None))
        rows = await index.run(lambda r: r.search_keyword('"owl"', 30, postings=10))
        assert len(ids) == 10 and len(rows) == 30
        started = {t.name.split("_")[0] for t in _ours() - before}
        assert {"pocketmcp.scan", "pocketmcp.fts"} <= started
    finally:
        index.close()
    assert _still_alive(_ours() - before, seconds=5) == []
    # A closed index still answers, on the caller's thread alone.
    again = await index.run(lambda r: r.search_keyword('"owl"', 30, postings=10))
    assert [score for _, score, _ in again] == [score for _, score, _ in rows]
    assert _ours() - before == set()
    index.close()  # twice is harmless


def test_work_given_to_closed_threads_runs_on_the_calling_thread() -> None:
    pool = Threads(2, "pocketmcp.test")
    spans = [(0, 3), (3, 5), (5, 9)]
    ran: set[str] = set()

    def names(start: int, end: int) -> list[int]:
        ran.add(threading.current_thread().name)
        return list(range(start, end))

    assert pool.map(names, spans) == [list(range(s, e)) for s, e in spans]
    assert ran and all(name.startswith("pocketmcp.test") for name in ran)
    pool.close()
    ran.clear()
    assert pool.map(names, spans) == [list(range(s, e)) for s, e in spans]
    assert ran == {threading.current_thread().name}
    assert pool.submit(names, 0, 1) is None


def test_a_warm_up_told_to_stop_leaves_the_mapping_as_it_was(db: Path) -> None:
    cols = open_columns(vectors_path(db), DIM)
    try:
        state = cols.state()
        assert state is not None and state.rows == DOCS * PER_DOC
        stop = threading.Event()
        stop.set()
        vector_index._warm(cols, state.rows, stop)
        assert cols.rowcodes is None  # an unfinished copy is not handed to searches
        vector_index._warm(cols, state.rows, threading.Event())
        assert cols.rowcodes is not None and cols.rowcodes.rows == state.rows
    finally:
        cols.close()


def test_closed_chunk_lengths_read_nothing_more_in_the_background(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    held = ChunkLengths()
    held.close()
    held.prefetch(db)
    assert held._reader is None  # no read started
    # A read already under way gives up at its next check, and records no failure.
    monkeypatch.setattr(ChunkLengths, "CHECK_STEPS", 100)
    held._read(db)
    assert held._identity is None and held._failed is None


async def test_a_writer_closes_the_views_it_made(db: Path) -> None:
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        view = writer.view()
        reader = await view.run(lambda r: r)
        assert reader.counts()["chunks"] == DOCS * PER_DOC
    finally:
        writer.close()
    with pytest.raises(StoreError):
        reader.counts()  # its connection is closed
