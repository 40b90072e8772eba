"""Vectors of removed chunks, kept a while by their text, over both stores: the same text
coming back takes its vector from there; `chunks_removed` counts the chunks that left with
no successor of the same text; the kept vectors are bounded in time and in number."""

from __future__ import annotations

import numpy as np
from support.records import chunks as _chunks
from support.records import doc as _doc
from support.records import unit_vectors as _vectors

from pocketmcp.messages import Chunk, DocRecord, Written
from pocketmcp.store.api import ReadIndex, StoreWriter
from pocketmcp.store.writes import without_successor


def _put(writer: StoreWriter, doc: DocRecord, chunks: tuple[Chunk, ...],
         vectors: np.ndarray | None) -> Written:
    """Written with its vectors, or (None) for keywords first: those it can reuse at once."""
    return writer.batch(lambda: writer.upsert(
        doc, chunks, None if vectors is None else vectors.tobytes()), [doc.external_id])


def _delete(writer: StoreWriter, ext: str) -> tuple[int, int] | None:
    return writer.batch(lambda: writer.delete(ext), [ext])


def _kept(writer: StoreWriter) -> int:
    return int(writer.batch(lambda: writer.execute(  # type: ignore[attr-defined]
        "SELECT count(*) FROM kept_vectors").fetchone()[0], []))


async def _vector_of(index: ReadIndex, sha: str) -> bytes | None:
    return (await index.run(lambda r: r.vectors_for([sha]))).get(sha)


def test_each_new_chunk_carries_on_one_old_chunk_of_its_text() -> None:
    assert without_successor(["a", "b", "c"], ["c", "a", "x"]) == [1]
    assert without_successor(["a", "a", "b"], ["a"]) == [1, 2]
    assert without_successor(["a"], []) == [0]
    assert without_successor([], ["a"]) == []


async def test_an_update_counts_as_removed_only_the_chunks_that_left_without_successor(
        store) -> None:
    writer, _ = store
    writer.keep_removed(3600, 100)
    old = _chunks("One. ", "Two. ", "Three.")
    _put(writer, _doc("a", *[c.text for c in old]), old, _vectors(3))
    new = _chunks("One. ", "Four.")
    changed = _put(writer, _doc("a", *[c.text for c in new]), new, None)
    # "One. " carries on (its vector reused at once); "Two. " and "Three." left.
    assert (changed.status, changed.chunks_removed, changed.waiting) == ("updated", 2, 1)
    assert _kept(writer) == 2


async def test_a_deleted_document_written_again_takes_its_kept_vectors(store) -> None:
    writer, index = store
    writer.keep_removed(3600, 100)
    chunks = _chunks("Herons stand still. ", "Otters play in rivers.")
    doc = _doc("a", *[c.text for c in chunks])
    vectors = _vectors(2, seed=4)
    _put(writer, doc, chunks, vectors)
    assert _delete(writer, "a") is not None
    assert await index.run(lambda r: r.counts()) == {"documents": 0, "chunks": 0,
                                                     "waiting": 0}
    # The same text, moved elsewhere: no chunk waits for the model.
    again = _put(writer, _doc("elsewhere/a", *[c.text for c in chunks]), chunks, None)
    assert (again.status, again.chunks, again.waiting) == ("inserted", 2, 0)
    for chunk, vector in zip(chunks, vectors, strict=True):
        stored = await _vector_of(index, chunk.sha256)
        assert stored is not None
        assert np.allclose(np.frombuffer(stored, np.float32), vector, atol=1e-6)


async def test_without_keeping_a_deleted_documents_text_waits_for_the_model_again(
        store) -> None:
    writer, _ = store  # kept for no time: a writer not told otherwise keeps none
    chunks = _chunks("Herons stand still. ", "Otters play in rivers.")
    _put(writer, _doc("a", *[c.text for c in chunks]), chunks, _vectors(2))
    _delete(writer, "a")
    assert _kept(writer) == 0
    again = _put(writer, _doc("a", *[c.text for c in chunks]), chunks, None)
    assert again.waiting == 2


async def test_kept_vectors_are_bounded_in_number_and_in_time(store) -> None:
    writer, index = store
    writer.keep_removed(3600, 2)
    three = _chunks("Alpha text. ", "Beta text. ", "Gamma text.")
    _put(writer, _doc("a", *[c.text for c in three]), three, _vectors(3))
    _delete(writer, "a")
    assert _kept(writer) == 2  # the newest two at most
    # An hour and more later: those kept then go when the next ones are kept.
    writer.batch(lambda: writer.execute(  # type: ignore[attr-defined]
        "UPDATE kept_vectors SET kept_at = kept_at - 7200"), [])
    one = _chunks("Delta text.")
    _put(writer, _doc("b", "Delta text."), one, _vectors(1, seed=9))
    _delete(writer, "b")
    assert _kept(writer) == 1
    assert await _vector_of(index, one[0].sha256) is not None
    assert all([await _vector_of(index, c.sha256) is None for c in three])
