"""The keyword stage over SQLite's FTS5 tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pocketmcp.core.identity import Identity
from pocketmcp.core.keywords import reference_bm25
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite.keywords.lengths import varint
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 8
TEXTS = [f"note {i} about owls" if i % 4 == 0 else f"note {i} about bread and yeast"
         for i in range(200)]


def _index(tmp_path: Path) -> Path:
    """An index of TEXTS, one chunk a document."""
    db = tmp_path / "index.db"
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.begin()
        for i, text in enumerate(TEXTS):
            vec = np.random.default_rng(i).normal(size=(1, DIM)).astype(np.float32)
            writer.upsert(DocRecord(external_id=f"d{i}", source="raw", uri=None, title=f"d{i}",
                                    content=text, sha256=sha256(text)),
                          (Chunk(idx=0, start=0, end=len(text), text=text, tokens=5,
                                 sha256=sha256(text)),),
                          (vec / np.linalg.norm(vec)).tobytes())
        writer.commit()
    finally:
        writer.close()
    return db


@pytest.mark.parametrize(("blob", "value"), [(b"\x05", 5), (b"\x87\x66\x01", 998),
                                             (b"\x81\x80\x00", 16384), (b"\xff" * 9, 2**64 - 1)])
def test_a_varint_is_read_as_sqlite_writes_it(blob: bytes, value: int) -> None:
    assert varint(blob)[0] == value


def test_the_keyword_stage_counts_chunks_itself_when_the_caller_has_not_caught_up(
    tmp_path: Path
) -> None:
    # A process that has just indexed may search before its vector file has synced: the
    # count it passes is then 0 (or behind). The words kept and the reference must not
    # depend on it: with 0, every word was kept and the reference fell to 1e-6 a word,
    # so the first search after indexing ranked by keywords alone.
    db = _index(tmp_path)
    reader = SqliteReader(db)
    try:
        assert reader.fts_rows() == len(TEXTS)
        right = reader.keyword_stage("owls and yeast", 10, None, title_weight=1.0,
                                     total=len(TEXTS), documents=False)
        stale = reader.keyword_stage("owls and yeast", 10, None, title_weight=1.0,
                                     total=0, documents=False)
    finally:
        reader.close()
    # "yeast" is in 75% of the chunks: too common to search for; "owls" is kept.
    assert right.reference == pytest.approx(reference_bm25([50], len(TEXTS)))
    assert stale.reference == right.reference and stale.keyword == right.keyword


def test_only_a_keyword_stage_running_alone_splits_its_chunk_query_and_both_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pocketmcp.store.sqlite import halves
    from pocketmcp.store.sqlite.keywords import bm25

    db = _index(tmp_path)
    monkeypatch.setattr(halves, "SPLIT_POSTINGS", 10)  # "owls" is in 50 chunks
    monkeypatch.setattr(bm25, "best_chunks", lambda *args: None)  # FTS5 runs it
    helpers = Threads(1, "pocketmcp.fts")
    beside, alone = SqliteReader(db, helpers=helpers), SqliteReader(db, helpers=helpers)
    try:
        kwargs = {"title_weight": 1.0, "total": len(TEXTS), "documents": False}
        shared = beside.keyword_stage("owls note", 20, None, **kwargs)
        split = alone.keyword_stage("owls note", 20, None, alone=True, **kwargs)
        assert beside._second is None and alone._second is not None
        assert list(split.keyword.items()) == list(shared.keyword.items())
        assert len(split.keyword) == 20 and split.doc_of == shared.doc_of
    finally:
        beside.close()
        alone.close()
        helpers.close()
