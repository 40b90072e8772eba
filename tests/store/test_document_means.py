"""A document's mean cosine over all its chunks, the same on both stores: in an index of long
pages, a search with one match per document blends it into the document's score by meaning
(search/shape.py). The same small corpus on a real SQLite file and a real Postgres with
pgvector gives every document the mean of its chunks' cosines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.records import DIM, IDENTITY, unit_vectors
from support.records import doc as _doc

from pocketmcp.core.secret import Secret
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk
from pocketmcp.store.api import Place
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

# (external id, number of chunks)
SIZES = [("one", 1), ("three", 3), ("seven", 7), ("left-out", 2)]


async def _means(place: Place, query: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
    """(each asked document's mean cosine from the store, the same from the vectors
    written), for every document but "left-out"."""
    writer = place.writer(IDENTITY)
    names: dict[int, str] = {}
    expected: dict[str, float] = {}
    try:
        for seed, (ext, n) in enumerate(SIZES):
            texts = [f"Part {i} of {ext}. " for i in range(n)]
            chunks, start = [], 0
            for i, text in enumerate(texts):
                chunks.append(Chunk(idx=i, start=start, end=start + len(text), text=text,
                                    tokens=4, sha256=sha256(text)))
                start += len(text)
            vectors = unit_vectors(n, seed=seed)
            expected[ext] = float((vectors @ query).mean())
            record, stored = _doc(ext, *texts), vectors.tobytes()
            written = writer.batch(lambda d=record, c=tuple(chunks), v=stored: writer.upsert(
                d, c, v), [ext])
            names[written.doc_id] = ext
    finally:
        writer.close()
    index = place.reader(DIM)
    try:
        asked = [d for d, ext in names.items() if ext != "left-out"]
        found = await index.run(lambda r: index.mean_cosines(r, query, asked))
        none = await index.run(lambda r: index.mean_cosines(r, query, []))
    finally:
        index.close()
    assert none == {}
    return {names[d]: m for d, m in found.items()}, {
        ext: m for ext, m in expected.items() if ext != "left-out"}


async def test_both_stores_give_each_document_the_mean_cosine_of_its_chunks(
        tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    query = unit_vectors(1, seed=99)[0]
    sqlite, expected = await _means(
        SqlitePlace(tmp_path / "index.db", tmp_path / "databases"), query)
    postgres, _ = await _means(PgPlace(Secret(pg_url), pg_schema), query)
    assert set(sqlite) == set(postgres) == {"one", "three", "seven"}
    for ext, mean in expected.items():
        # SQLite scores from its float16 vector file, Postgres from float32.
        assert sqlite[ext] == pytest.approx(mean, abs=2e-3)
        assert postgres[ext] == pytest.approx(mean, abs=1e-5)
