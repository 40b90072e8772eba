"""One match per document ranks documents by their words the same way on both stores: BM25
over the whole document (its idf over documents, its length against the average document's),
not by the document's best chunk. The same small corpus on a real SQLite file and a real
Postgres with pgvector gives the same documents in the same order with the same scores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.records import DIM, IDENTITY
from support.records import doc as _doc
from support.records import unit_vectors as _vectors

from pocketmcp.core.secret import Secret
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk
from pocketmcp.search.fuse import best_per_doc
from pocketmcp.store.api import Place
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

# (external id, title, chunk texts). "long" holds both words of the query in two of its
# three chunks; "twice" holds one word twice in one short chunk, its best chunk the
# best of all; the others only fill the index so that the words are rare.
CORPUS = [
    ("long", "Field notes", [
        "Herons wade in the shallow marsh at dawn, looking for fish and frogs. ",
        "Otters dive under the water and play along the river bank all day long. ",
        "The reeds grow tall by the water in summer and shelter many small birds. "]),
    ("twice", "Marsh birds", ["Herons and more herons by the marsh. "]),
    ("titled", "Otter sightings", [
        "Seen near the weir twice this month, once with young. ",
        "The weir is loud after rain and the path floods in winter. "]),
    ("short", "Wading", ["Herons stand still. "]),
    *[(f"filler{i}", f"Filler {i}", [f"Kingfishers perch above stream number {i} at noon. ",
                                      f"Ducks float on pond number {i} in the evening. "])
      for i in range(6)],
]


def _tokens(text: str) -> int:
    return len(re.findall(r"\w+", text))


def _write(place: Place) -> dict[int, str]:
    """The corpus written to `place`; each chunk's tokens are its words (the first chunk's
    with the title's), as FTS5 counts a document's length. Doc id -> external id."""
    writer = place.writer(IDENTITY)
    names: dict[int, str] = {}
    try:
        for ext, title, texts in CORPUS:
            chunks, start = [], 0
            for i, text in enumerate(texts):
                chunks.append(Chunk(idx=i, start=start, end=start + len(text), text=text,
                                    tokens=_tokens(text) + (_tokens(title) if i == 0 else 0),
                                    sha256=sha256(text)))
                start += len(text)
            doc = _doc(ext, *texts, title=title)
            vectors = _vectors(len(chunks), seed=len(names)).tobytes()
            written = writer.batch(lambda d=doc, c=tuple(chunks), v=vectors: writer.upsert(
                d, c, v), [ext])
            names[written.doc_id] = ext
    finally:
        writer.close()
    return names


async def _documents(place: Place, query: str, title_weight: float
                     ) -> tuple[list[tuple[str, float]], dict[str, int], float,
                                dict[str, float]]:
    """(documents by score, best first, with their scores; each document's first chunk as
    its position in the document; the scale's reference; the scores when only "short" and
    "twice" may match) of one keyword stage."""
    names = _write(place)
    index = place.reader(DIM)
    ids = {ext: doc_id for doc_id, ext in names.items()}
    try:
        found = await index.run(lambda r: r.keyword_stage(
            query, 50, None, title_weight=title_weight, total=20, documents=True))
        first = {names[d]: (await index.run(lambda r, c=c: r.chunk(c))).idx  # type: ignore
                 for d, c in found.first_chunk.items()}
        some = await index.run(lambda r: r.keyword_stage(
            query, 50, [ids["short"], ids["twice"]], title_weight=title_weight, total=20,
            documents=True))
    finally:
        index.close()
    ranked = sorted(found.doc_keyword.items(), key=lambda item: (-item[1], names[item[0]]))
    return ([(names[d], s) for d, s in ranked], first, found.reference,
            {names[d]: s for d, s in some.doc_keyword.items()})


@pytest.mark.parametrize("title_weight", [1.0, 2.0])
async def test_both_stores_rank_documents_by_whole_document_bm25(
        tmp_path: Path, pg_url: str, pg_schema: str, title_weight: float) -> None:
    query = "herons otters"
    sqlite = await _documents(SqlitePlace(tmp_path / "index.db", tmp_path / "databases"),
                              query, title_weight)
    postgres = await _documents(PgPlace(Secret(pg_url), pg_schema), query, title_weight)
    # Every document holding a word; "long" (both words, in different chunks) first, though
    # "twice" has the best chunk for these words, unless the title counts double ("titled").
    assert sqlite[0][0][0] == ("long" if title_weight == 1.0 else "titled")
    assert {d for d, _ in sqlite[0]} == {"long", "twice", "titled", "short"}
    assert [d for d, _ in postgres[0]] == [d for d, _ in sqlite[0]]
    assert [s for _, s in postgres[0]] == pytest.approx([s for _, s in sqlite[0]], rel=1e-9)
    assert postgres[1] == sqlite[1] == {d: 0 for d, _ in sqlite[0]}  # the first chunks
    assert postgres[2] == pytest.approx(sqlite[2], rel=1e-9)  # one 0..1 scale
    # Documents left out narrow the matches, not the statistics: the same scores.
    for store in (sqlite, postgres):
        assert store[3] == pytest.approx({d: s for d, s in store[0] if d in ("short", "twice")},
                                         rel=1e-12)


async def _best_chunks(place: Place, query: str) -> list[tuple[str, float]]:
    """Documents by their best chunk's keyword score, best first, as one match per document
    ranks them in an index of long pages: from the chunk list, whose scores are BM25 on
    both stores."""
    names = _write(place)
    index = place.reader(DIM)
    try:
        found = await index.run(lambda r: r.keyword_stage(
            query, 50, None, title_weight=1.0, total=20, documents=False, best_chunks=True))
    finally:
        index.close()
    scores = found.doc_keyword or best_per_doc(found.keyword, found.doc_of)
    return [(names[d], s) for d, s in sorted(scores.items(), key=lambda i: (-i[1], names[i[0]]))]


async def test_both_stores_rank_long_pages_by_their_best_chunk_for_words(
        tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    sqlite = await _best_chunks(SqlitePlace(tmp_path / "index.db", tmp_path / "databases"),
                                "herons otters")
    postgres = await _best_chunks(PgPlace(Secret(pg_url), pg_schema), "herons otters")
    # "twice" (one word twice in one short chunk) has the best chunk; over whole documents
    # "long" ranks first (the test above).
    assert sqlite[0][0] == "twice"
    assert [d for d, _ in postgres] == [d for d, _ in sqlite]
    # Both count a chunk's length in FTS5's terms, its title column included.
    assert [s for _, s in postgres] == pytest.approx([s for _, s in sqlite], rel=1e-9)

