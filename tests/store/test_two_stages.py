"""Writing a document in two stages, the same over both stores (SQLite files, and Postgres
with pgvector): its text and keywords first, searchable at once, its vectors when they come;
an edit in between replaces the old version whole, vectors of an old version are refused,
and nothing is written twice."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from support.records import DIM, IDENTITY
from support.records import chunks as _chunks
from support.records import doc as _doc
from support.records import unit_vectors as _vectors

from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord, Written
from pocketmcp.store.api import ReadIndex, StoreWriter
from pocketmcp.store.sqlite.place import SqlitePlace


def _keywords(writer: StoreWriter, doc: DocRecord, chunks: tuple[Chunk, ...],
              rank: int = 0) -> Written:
    """Stage one: the text and keywords, no vectors."""
    return writer.batch(lambda: writer.upsert(doc, chunks, None, rank=rank),
                        [doc.external_id])


def _vectors_of(writer: StoreWriter, doc_id: int, sha: str, chunks: tuple[Chunk, ...],
                vectors: np.ndarray, ext: str) -> bool:
    """Stage two."""
    return writer.batch(lambda: writer.add_vectors(doc_id, sha, chunks, vectors.tobytes()),
                        [ext])


async def _found(index: ReadIndex, words: str) -> set[int]:
    found = await index.run(lambda r: r.keyword_stage(words, 10, None, title_weight=1.0,
                                                      total=10, documents=False))
    return set(found.doc_of.values())


async def _nearest_docs(index: ReadIndex, query: np.ndarray) -> list[int]:
    await index.open_vectors()
    _, _, docs = await index.run(lambda r: index.nearest(r, query, 10, 1000, None))
    return docs.tolist()


async def test_keywords_first_then_vectors_and_never_twice(store) -> None:
    writer, index = store
    chunks = _chunks("Lighthouse keepers trim the wick. ", "Gulls circle the lamp.")
    doc = _doc("a", *[c.text for c in chunks])
    written = _keywords(writer, doc, chunks)
    assert (written.status, written.chunks, written.waiting) == ("inserted", 2, 2)
    # In the gap: found by its words, in no vector search, counted as waiting.
    assert await _found(index, "lighthouse") == {written.doc_id}
    vectors = _vectors(2)
    assert await _nearest_docs(index, vectors[0]) == []
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 2, "waiting": 2}
    backlog = await index.run(lambda r: r.embed_backlog(10))
    assert [(d.doc_id, d.sha256, [c.text for c in d.chunks]) for d in backlog] == [
        (written.doc_id, doc.sha256, [c.text for c in chunks])]
    waiting = await index.run(lambda r: r.waiting_among([1, 2, 3, 4, 5, 6, 7, 8]))
    assert len(waiting) == 2
    # Stage two: the vectors come, once.
    assert _vectors_of(writer, written.doc_id, doc.sha256, chunks, vectors, "a")
    assert not _vectors_of(writer, written.doc_id, doc.sha256, chunks, vectors, "a")
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 2, "waiting": 0}
    assert await index.run(lambda r: r.embed_backlog(10)) == []
    assert (await _nearest_docs(index, vectors[1]))[:2] == [written.doc_id] * 2
    assert await _found(index, "gulls") == {written.doc_id}  # keywords kept
    rows = await index.run(lambda r: r.neighbours(written.doc_id, 0, 5))
    assert [r[3] for r in rows] == [c.text for c in chunks]


async def test_a_chunk_keeps_its_id_when_its_vector_comes(store) -> None:
    """An id read while the chunk waits (a search's, a link's) names the same chunk once
    the vector is in, though a later document got its vectors first, and a search by
    meaning finds the chunk under it."""
    writer, index = store
    chunks = _chunks("Herons wade in the marsh at dawn. ", "Otters dive for fish.")
    doc = _doc("a", *[c.text for c in chunks])
    written = _keywords(writer, doc, chunks)
    later = _chunks("Kingfishers perch above the stream.")
    other = _keywords(writer, _doc("b", later[0].text), later)  # a later id
    found = await index.run(lambda r: r.keyword_stage("herons otters", 10, None,
                                                      title_weight=1.0, total=10,
                                                      documents=False))
    ids = sorted(c for c, d in found.doc_of.items() if d == written.doc_id)
    assert len(ids) == 2

    def rows(r: Any) -> list[Any]:
        return [(row.doc_id, row.idx, row.text) if (row := r.chunk(i)) else None for i in ids]

    before = await index.run(rows)
    assert before == [(written.doc_id, c.idx, c.text) for c in chunks]
    assert _vectors_of(writer, other.doc_id, _doc("b", later[0].text).sha256, later,
                       _vectors(1, seed=3), "b")  # the later document first
    vectors = _vectors(2, seed=7)
    assert _vectors_of(writer, written.doc_id, doc.sha256, chunks, vectors, "a")
    assert await index.run(rows) == before  # the same ids, the same chunks
    await index.open_vectors()
    for chunk_id, vector in zip(ids, vectors, strict=True):
        nearest, _, docs = await index.run(lambda r, v=vector: index.nearest(r, v, 1, 1000,
                                                                             None))
        assert (nearest.tolist(), docs.tolist()) == ([chunk_id], [written.doc_id])
    waiting = await index.run(lambda r: r.waiting_among(ids))
    assert waiting == set()


async def test_an_edit_in_the_gap_replaces_the_old_text_and_its_late_vectors_are_refused(
        store) -> None:
    writer, index = store
    old = _chunks("Old notes about herons. ", "Herons stand still.")
    old_doc = _doc("a", *[c.text for c in old])
    first = _keywords(writer, old_doc, old)
    new = _chunks("New notes about otters.")
    new_doc = _doc("a", *[c.text for c in new])
    second = _keywords(writer, new_doc, new, rank=5)
    assert (second.doc_id, second.status, second.chunks_removed) == (
        first.doc_id, "updated", 2)
    assert await _found(index, "herons") == set()  # the old text is gone, whole
    assert await _found(index, "otters") == {first.doc_id}
    # The old version's vectors, arriving late, are refused: nothing written.
    assert not _vectors_of(writer, first.doc_id, old_doc.sha256, old, _vectors(2), "a")
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 1, "waiting": 1}
    assert _vectors_of(writer, first.doc_id, new_doc.sha256, new, _vectors(1, seed=2), "a")
    assert await index.run(lambda r: r.counts()) == {"documents": 1, "chunks": 1, "waiting": 0}


async def test_the_most_recently_changed_documents_wait_first(store) -> None:
    writer, index = store
    ids = {}
    for rank, name in enumerate(["old", "middle", "new"]):
        chunks = _chunks(f"The {name} note.")
        ids[name] = _keywords(writer, _doc(name, chunks[0].text), chunks, rank=rank).doc_id
    order = await index.run(lambda r: r.embed_backlog(10))
    assert [d.doc_id for d in order] == [ids["new"], ids["middle"], ids["old"]]
    edited = _chunks("The old note, edited now.")
    _keywords(writer, _doc("old", edited[0].text), edited, rank=100)  # an edit jumps ahead
    order = await index.run(lambda r: r.embed_backlog(2, [ids["new"]]))
    assert [d.doc_id for d in order] == [ids["old"], ids["middle"]]  # `new` is on its way


async def test_an_edit_keeps_the_vectors_of_its_unchanged_chunks(store) -> None:
    writer, index = store
    chunks = _chunks("Same first part. ", "Second part.")
    doc = _doc("a", *[c.text for c in chunks])
    vectors = _vectors(2, seed=4)
    writer.batch(lambda: writer.upsert(doc, chunks, vectors.tobytes()), ["a"])
    edited = _chunks("Same first part. ", "Second part, changed.")
    written = _keywords(writer, _doc("a", *[c.text for c in edited]), edited)
    assert written.waiting == 1  # only the changed chunk waits
    assert (await _nearest_docs(index, vectors[0]))[:1] == [written.doc_id]
    backlog = await index.run(lambda r: r.embed_backlog(10))
    assert [c.text for c in backlog[0].chunks] == ["Second part, changed."]
    waiting_chunk = tuple(c for c in edited if c.idx == 1)
    doc_sha = sha256("".join(c.text for c in edited))
    assert _vectors_of(writer, written.doc_id, doc_sha, waiting_chunk, _vectors(1, seed=5), "a")
    counts: dict[str, Any] = await index.run(lambda r: r.counts())
    assert counts == {"documents": 1, "chunks": 2, "waiting": 0}
    rows = await index.run(lambda r: r.neighbours(written.doc_id, 0, 5))
    assert [r[3] for r in rows] == [c.text for c in edited]


async def test_bm25_over_a_folder_written_in_two_stages_is_as_over_one_written_at_once(
        tmp_path: Path) -> None:
    """FTS5's totals (rows, tokens: what BM25 weighs words by) count each chunk once, its
    keyword row written while it waited and kept with its vector (and a waiting version
    replaced by an edit not at all)."""
    texts = [("a", "Herons wade in the marsh at dawn. "), ("b", "Otters dive for fish. "),
             ("c", "Herons and otters share the river.")]
    at_once = SqlitePlace(tmp_path / "once.db", tmp_path / "d1")
    staged = SqlitePlace(tmp_path / "staged.db", tmp_path / "d2")
    one, two = at_once.writer(IDENTITY), staged.writer(IDENTITY)
    try:
        for i, (ext, text) in enumerate(texts):
            chunks = _chunks(text)
            doc, vectors = _doc(ext, text), _vectors(1, seed=i).tobytes()
            one.batch(lambda d=doc, c=chunks, v=vectors: one.upsert(d, c, v), [ext])
            if ext == "c":  # a version replaced while it waits
                first = _chunks("An old draft about kingfishers and herons.")
                _keywords(two, _doc(ext, first[0].text), first)
            written = _keywords(two, _doc(ext, text), chunks)
            assert _vectors_of(two, written.doc_id, sha256(text), chunks,
                               _vectors(1, seed=i), ext)
        two.batch(lambda: None, [])  # the next transaction settles the totals
    finally:
        one.close()
        two.close()
    await _same_keywords(at_once, staged, rows=3)


async def test_the_backlog_is_read_in_two_queries_each_document_with_its_own_chunks(
        store) -> None:
    writer, index = store
    ids = []
    for n in range(6):
        chunks = _chunks(f"Note {n} opens here. ", f"Note {n} goes on. ", f"Note {n} ends.")
        ids.append(_keywords(writer, _doc(f"n{n}", *[c.text for c in chunks]), chunks,
                             rank=n).doc_id)

    def counted(reader: Any) -> tuple[list[Any], int]:
        # The store's one way to the database: SqliteReader.query, PgReader._rows.
        name = "query" if hasattr(reader, "query") else "_rows"
        run = getattr(reader, name)
        calls: list[object] = []
        setattr(reader, name, lambda *args: calls.append(args) or run(*args))
        try:
            return reader.embed_backlog(10), len(calls)
        finally:
            delattr(reader, name)

    backlog, queries = await index.run(counted)
    assert queries <= 2, queries  # not one more query per document
    assert [d.doc_id for d in backlog] == ids[::-1]
    for n, doc in zip(range(5, -1, -1), backlog, strict=True):
        assert [c.text for c in doc.chunks] == [
            f"Note {n} opens here. ", f"Note {n} goes on. ", f"Note {n} ends."]
        assert [c.idx for c in doc.chunks] == [0, 1, 2]


async def test_one_transaction_of_many_edits_in_the_gap_notes_the_keyword_debt_once(
        tmp_path: Path) -> None:
    """Many documents edited while they wait, in one transaction (one edit undone by its
    own error): the totals still come out as if only the last versions were written at
    once, the debt is noted in meta once before the commit, a transaction that owes nothing
    does not read it, and one that gives chunks their vectors owes nothing (their keyword
    rows stay)."""
    texts = [(f"d{i}", f"Note {i}: herons wade and otters dive, {i} times over. ")
             for i in range(6)]
    at_once = SqlitePlace(tmp_path / "once.db", tmp_path / "d1")
    staged = SqlitePlace(tmp_path / "staged.db", tmp_path / "d2")
    one, two = at_once.writer(IDENTITY), staged.writer(IDENTITY)
    statements: list[str] = []
    try:
        for i, (ext, text) in enumerate(texts):
            chunks, doc = _chunks(text), _doc(ext, text)
            vectors = _vectors(1, seed=i).tobytes()
            one.batch(lambda d=doc, c=chunks, v=vectors: one.upsert(d, c, v), [ext])
            draft = _chunks(f"Draft {i}: kingfishers nest by the herons.")
            _keywords(two, _doc(ext, draft[0].text), draft)
        doc_ids: dict[str, int] = {}

        def edits() -> None:
            for i, (ext, text) in enumerate(texts):
                try:
                    with two.item():
                        doc_ids[ext] = two.upsert(_doc(ext, text), _chunks(text), None).doc_id
                        if i == 2:
                            raise ValueError("this item fails after its keyword rows went")
                except ValueError:
                    pass

        two._conn.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        two.batch(edits, [ext for ext, _ in texts])
        notes = [s for s in statements if "INTO meta" in s]
        assert len(notes) == 1, notes
        statements.clear()
        two.batch(lambda: None, [])  # settled already: nothing owed, nothing read
        assert not [s for s in statements if "meta" in s], statements
        # The edit whose item failed, in a batch of its own; then every vector at once.
        doc_ids["d2"] = _keywords(two, _doc("d2", texts[2][1]), _chunks(texts[2][1])).doc_id
        statements.clear()

        def all_vectors() -> None:
            for i, (ext, text) in enumerate(texts):
                assert two.add_vectors(doc_ids[ext], sha256(text), _chunks(text),
                                       _vectors(1, seed=i).tobytes())

        two.batch(all_vectors, [ext for ext, _ in texts])
        # Neither meta nor a keyword row touched (\b: vec0's tables hold "metadata").
        assert not [s for s in statements if re.search(r"\bmeta\b|chunks_fts", s)], (
            statements)
    finally:
        two._conn.set_trace_callback(None)  # type: ignore[attr-defined]
        one.close()
        two.close()
    await _same_keywords(at_once, staged, rows=6)


async def _same_keywords(at_once: SqlitePlace, staged: SqlitePlace, *, rows: int) -> None:
    """Both indexes hold `rows` keyword rows and score "herons otters" alike."""
    results = []
    for place in (at_once, staged):
        index = place.reader(DIM)
        try:
            fts = await index.run(lambda r: r.fts_rows())  # type: ignore[attr-defined]
            found = await index.run(lambda r: r.keyword_stage(
                "herons otters", 10, None, title_weight=1.0, total=rows, documents=False))
            results.append((fts, sorted(found.keyword.values())))
        finally:
            index.close()
    assert results[0] == results[1] and results[0][0] == rows
