"""The retrieve step: the vector and keyword lists of one query, side by side.

Vectors: the index's vector file (1-bit passes, then float16 copies, within about 0.001 of
the exact cosine); `exact_scores` reads the stored float32 vectors instead. Keywords: BM25
over chunk text and document title (and with one match per document, over whole
documents). When the query cannot be embedded (the provider is down), the lists are keyword
lists and a notice says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import numpy as np
import numpy.typing as npt

from pocketmcp import logs
from pocketmcp.blas import one_blas_thread
from pocketmcp.embed.background import model_background
from pocketmcp.errors import EmbeddingError, InvalidRequest
from pocketmcp.plans import Reading
from pocketmcp.search import deadline, shape
from pocketmcp.search.filters import Scope
from pocketmcp.search.fuse import DEFAULT_PARAMS, MODES, Mode, Params, Stage
from pocketmcp.store.api import Reader, ReadIndex
from pocketmcp.store.rows import Keywords

log = logs.get("pocketmcp.search")

F32 = npt.NDArray[np.float32]
Waiting = tuple[int, set[int]]  # chunks of the index waiting for vectors; those among the hits
# The share of a search's remaining time its query's embedding may take when the search can
# answer by keywords instead: a provider that stops answering leaves the rest of the deadline
# to the keyword results, rather than ending the search with DEADLINE_EXCEEDED.
EMBED_SHARE = 0.5


@dataclass(frozen=True)
class Retrieved:
    """Both lists of one query; the query's vector, or the notice saying why it could not be
    embedded; and, when asked for, how many chunks of the index wait for their vectors and
    which of the keyword hits do (waiting chunks have no vector: only keyword hits can)."""

    stage: Stage
    vector: F32 | None = None
    notice: str | None = None
    waiting: int = 0
    waiting_hits: frozenset[int] = frozenset()


async def retrieve(reading: Reading, query: str, *, mode: Mode, depth: int,
                   scope: Scope | None = None, params: Params = DEFAULT_PARAMS,
                   unique_docs: bool = False, fallback: bool = True,
                   again: Retrieved | None = None, waiting: bool = False) -> Retrieved:
    """Both retrievers' lists for `query`, the two running side by side (embedding the query
    overlaps the BM25 query). Without `fallback` an embedding error is raised. `again`: an
    earlier retrieval of the query, whose embedding is taken as it was. With `waiting` (not
    in keyword mode), the waiting chunks are counted, on a list's own read."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")
    index = reading.index
    # The scope's documents, worked out once for both retrievers.
    allowed = None if scope is None else await index.run(scope.doc_ids)
    # One match per document: documents rank by their whole text's BM25; in an index of
    # long pages (shape.py) by their best chunk's, and by their mean meaning beside their
    # best chunk's.
    long_pages = unique_docs and (await shape.shape_of(index)).best_chunk(params)
    documents = unique_docs and params.document_keywords and not long_pages
    means = long_pages and mode == "hybrid" and params.document_mean > 0
    doc_vector: dict[int, float] = {}
    vector, base, notice = (None, 0.0, None) if again is None else (
        again.vector, again.stage.vector_background, again.notice)
    nearest: tuple[dict[int, float], dict[int, int], Waiting | None] = ({}, {}, None)
    words: tuple[Keywords, Waiting | None] = (Keywords(), None)

    async def by_meaning() -> None:
        nonlocal vector, base, notice, nearest, doc_vector
        if again is None:
            vector, base, notice = await _embedded(reading, query, params, fallback, mode)
        if (asked := vector) is not None:
            nearest = await index.run(lambda r: _vector_list(
                index, r, asked, depth, allowed, params, waiting and mode == "vector"))
            if means:
                docs = sorted(set(nearest[1].values()))
                doc_vector = await index.run(lambda r: index.mean_cosines(r, asked, docs))

    async def by_words() -> None:
        nonlocal words

        def read(reader: Reader) -> tuple[Keywords, Waiting | None]:
            found = reader.keyword_stage(query, depth, allowed, title_weight=params.title_weight,
                                         total=index.live, documents=documents,
                                         alone=mode == "keyword", best_chunks=long_pages)
            return found, waiting_of([*found.keyword, *found.first_chunk.values()], reader) \
                if waiting and mode != "keyword" else None

        words = await index.run(read)

    async with anyio.create_task_group() as tg:
        if mode != "keyword":
            tg.start_soon(by_meaning, name="pocketmcp.search.vector")
        if mode != "vector":
            tg.start_soon(by_words, name="pocketmcp.search.keyword")
    if notice is not None and mode == "vector":
        await by_words()  # keywords alone, by their own scale
    found, counted = words
    count, hits = counted or nearest[2] or (0, set())
    by_documents = documents or long_pages
    stage = Stage(nearest[0], dict(found.keyword), {**nearest[1], **found.doc_of},
                  doc_keyword=found.doc_keyword if by_documents else {},
                  first_chunk=found.first_chunk if by_documents else {},
                  keyword_ref=found.reference, vector_background=base, doc_vector=doc_vector)
    return Retrieved(stage, vector, notice, count, frozenset(hits))


async def _embedded(reading: Reading, query: str, params: Params, fallback: bool, mode: Mode
                    ) -> tuple[F32 | None, float, str | None]:
    """The query's vector and the model's background similarity; with `fallback`, a notice
    instead when the provider fails or takes more than EMBED_SHARE of the time left."""
    left = deadline.remaining()
    limit = None if left is None or not fallback else left * EMBED_SHARE
    try:
        with anyio.move_on_after(limit) as bounded:
            vector = await reading.embedder.embed_query(query)
            return vector, await model_background(reading.embedder) if (
                params.calibrated) else 0.0, None
        assert limit is not None and bounded.cancelled_caught
        raise EmbeddingError(f"no embedding within {limit:.2g} s, half the time the search "
                             "had left (SEARCH_TIMEOUT_S)")
    except EmbeddingError as exc:
        if not fallback:
            raise
        log.warning("keyword_fallback", mode=mode, error=str(exc))
        return None, 0.0, f"only keyword results are shown: the query could not be embedded " \
                          f"({exc})"


def _vector_list(index: ReadIndex, reader: Reader, vector: F32, depth: int,
                 allowed: list[int] | None, params: Params, waiting: bool
                 ) -> tuple[dict[int, float], dict[int, int], Waiting | None]:
    """Nearest chunks by meaning and their documents (blocking); with `waiting`, how many
    chunks wait for their vectors (none of the nearest can)."""
    ids, scores, doc_ids = index.nearest(reader, vector, depth,
                                         candidates_for(index.live, params), allowed)
    return (dict(zip(ids.tolist(), scores.tolist(), strict=True)),
            dict(zip(ids.tolist(), doc_ids.tolist(), strict=True)),
            (reader.waiting_count(), set()) if waiting else None)


def waiting_of(chunk_ids: Sequence[int], reader: Reader) -> Waiting:
    """How many chunks of the index wait for vectors, and which of `chunk_ids` do
    (blocking; one indexed count when none wait)."""
    count = reader.waiting_count()
    return count, (reader.waiting_among(chunk_ids) if count and chunk_ids else set())


def exact_scores(reader: Reader, index: ReadIndex, chunk_ids: Sequence[int],
                 query: F32) -> dict[int, float]:
    """Cosine similarities from the stored float32 vectors (the vector file's are float16)."""
    ids, _, vectors = reader.vectors_by_ids(chunk_ids, index.dim)
    with one_blas_thread():  # a few rows: BLAS threads would cost far more (blas.py)
        # Row by row: a matrix product's rounding of a row depends on the rows beside it,
        # so a chunk's score would change with the others asked for (or their order).
        scores = np.vecdot(vectors, query)
    return dict(zip(ids.tolist(), scores.tolist(), strict=True))


def candidates_for(live: int, params: Params) -> int:
    """Rows rescored in float16 after the 1-bit passes: 0.2% of the index, at least 1000."""
    return params.candidates or max(1000, live // 500)
