"""Search over an index: the one code path behind `search`, `find_similar_documents`, the
CLI and `eval`.

Modes: `vector` (the index's vector file: 1-bit passes, then float16 copies, within about
0.001 of the exact cosine; `find_similar_documents` rescores what it returns from the stored
float32 vectors),
`keyword` (FTS5 BM25 over chunk text and document title) and `hybrid` (both, fused; see
`ranking` for how, and for the 0..1 `score`). Documents rank at their best chunk when
`unique_docs` is set; otherwise at most `max_per_doc` matches come from one document, and a
match next to a better one is merged into it. `context` adds neighbouring chunks to each
match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt

from pocketmcp import logs
from pocketmcp.blas import one_blas_thread
from pocketmcp.core import fusion
from pocketmcp.core.safe import safe_text
from pocketmcp.errors import EmbeddingError, InvalidRequest
from pocketmcp.ops import dated, deadline, floor, tuning
from pocketmcp.ops.calibrate import model_background
from pocketmcp.ops.filters import Scope, is_stale
from pocketmcp.ops.hits import Hit, match_of, with_context, with_passages
from pocketmcp.ops.pending import keywords_alone, pending_notice, waiting_of
from pocketmcp.ops.ranking import (
    DEFAULT_PARAMS,
    MODES,
    Mode,
    Params,
    Stage,
    background_of,
    fuse,
    relevance,
)
from pocketmcp.ops.results import (
    FindSimilarResult,
    SearchResult,
    SimilarChunk,
)
from pocketmcp.plans import Open, Reading
from pocketmcp.store.api import Reader, ReadIndex
from pocketmcp.store.rows import HitRow

log = logs.get("pocketmcp.search")

MAX_SIMILAR = 100
MAX_PER_DOC = 2  # matches from one document, by default
SCORE_THRESHOLD = 0.2  # the search tool's default
__all__ = ["DEFAULT_PARAMS", "MODES", "Mode", "Params", "Scope", "find_similar", "search"]


async def search(reading: Reading, query: str, *, top_k: int = 8, scope: Scope | None = None,
                 score_threshold: float | None = None, mode: Mode = "hybrid",
                 unique_docs: bool = False, context: int = 0,
                 max_per_doc: int = MAX_PER_DOC,
                 params: Params | None = None, fallback: bool = True,
                 strict_threshold: bool = False, dates: bool = False) -> SearchResult:
    """The best matches for `query`, best first. At most `max_per_doc` matches come from one
    document (0: no limit), and a match next to a better one of the same document is merged
    into it as one passage (not with 0). When the query cannot be embedded (the provider is
    down), hybrid and vector searches answer with keyword matches and a notice saying so;
    without `fallback` they raise instead. When `score_threshold` removes every match, the
    best few are returned anyway with a notice saying so (`floor`), unless
    `strict_threshold`. With `dates`, a date said in the query ("last week") filters the
    documents by their dates (`dated`). Without `params`, the index's own tuning
    (`tuning`: the defaults, or the fusion weight `check-search --apply` kept)."""
    params = params if params is not None else tuning.params_of(reading.index)
    if max_per_doc < 0:
        raise InvalidRequest("max_per_doc must be 0 (no limit) or more")

    async def run(text: str, where: Scope | None, strict: bool) -> tuple[SearchResult, bool]:
        hits, notice, pending, floored = await _ranked(reading, text, top_k=top_k, scope=where,
                                              score_threshold=score_threshold, mode=mode,
                                              unique_docs=unique_docs, context=context,
                                              params=params, per_doc=max_per_doc,
                                              fallback=fallback, strict=strict)
        return SearchResult(matches=[match_of(h) for h in hits],
                            notice=floor.joined(notice, pending)), floored

    # One deadline (SEARCH_TIMEOUT_S) for the whole search, however many runs it makes;
    # indexing in this process gives way meanwhile (marked once the index is open, so a
    # search that waits for the first scan does not hold that scan back).
    with reading.precedence.searching():
        async with deadline.within(reading.deadline_s):
            if dates:
                return await dated.search_dated(run, query, scope, strict=strict_threshold)
            return (await run(query, scope, strict_threshold))[0]


async def find_similar(open_reading: Open[Reading], text: str, top_k: int = 10, *,
                       max_bytes: int) -> FindSimilarResult:
    """The chunks nearest to `text` by cosine similarity, best first: a vector search."""
    if not 1 <= top_k <= MAX_SIMILAR:
        raise InvalidRequest(f"top_k must be from 1 to {MAX_SIMILAR}")
    query = safe_text(text)
    if not query.strip():
        raise InvalidRequest("text is empty: give the text to find similar documents to")
    if len(query.encode("utf-8")) > max_bytes:
        raise InvalidRequest(f"text is larger than MAX_FILE_MB ({max_bytes} bytes)")
    reading = await open_reading()
    with reading.precedence.searching():  # indexing gives way, as to a search
        async with deadline.within(reading.deadline_s):  # SEARCH_TIMEOUT_S, as a search
            hits, notice, pending, _ = await _ranked(reading, query, top_k=top_k,
                                                     mode="vector", exact=True)
    if notice:
        notice += "; `score` is then a keyword score, not a cosine similarity"
    notice = floor.joined(notice, pending)
    return FindSimilarResult(results=[  # the cosine itself, as documented
        SimilarChunk(chunk_id=h.row.chunk_id, doc_id=h.row.doc_id, text=h.row.text,
                     score=round(h.score if h.vector_score is None else h.vector_score, 6))
        for h in hits], notice=notice)


# A query as embedded: its vector (None when it could not be), the model's background
# similarity, and the notice saying why it could not be.
Embedded = tuple[npt.NDArray[np.float32] | None, float, str | None]


async def gather(reading: Reading, query: str, *, mode: Mode, depth: int,
                 scope: Scope | None = None, params: Params = DEFAULT_PARAMS,
                 unique_docs: bool = False, fallback: bool = True,
                 embedded: Embedded | None = None,
                 waiting: list[tuple[int, set[int]]] | None = None,
                 ) -> tuple[Stage, npt.NDArray[np.float32] | None, str | None]:
    """Both retrievers' lists for `query`, the query's vector when it was embedded, and a
    notice when it could not be (the lists are then keyword lists; without `fallback` the
    embedding error is raised). With `embedded`, the query is not embedded again. With
    `waiting` (not in keyword mode), how many chunks wait for their vectors and which of
    the keyword hits do (`waiting_of`) is added to it, on a stage's own read."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")
    index = reading.index
    stage = Stage({}, {}, {})
    # The scope's documents, worked out once for both retrievers.
    allowed = None if scope is None else await index.run(scope.doc_ids)
    query_vector: list[npt.NDArray[np.float32]] = []
    notice: str | None = None

    async def by_meaning() -> None:
        nonlocal notice
        if embedded is not None:
            known, base, notice = embedded
            if known is None:
                return
            vector = known
        else:
            try:
                vector, base = await _embedded(reading, query, params, fallback)
            except EmbeddingError as exc:
                if not fallback:
                    raise
                notice = (f"only keyword results are shown: the query could not be embedded "
                          f"({exc})")
                log.warning("keyword_fallback", mode=mode, error=str(exc))
                return
        query_vector.append(vector)
        stage.vector_background = base
        await index.run(lambda r: _vector_stage(index, r, stage, vector, depth, allowed,
                                                params, waiting if mode == "vector" else None))

    async def by_words() -> None:
        def words(reader: Reader) -> None:
            _keyword_stage(reader, stage, query, depth, allowed, params, index.live,
                           unique_docs and params.document_keywords, alone=mode == "keyword")
            if waiting is not None and mode != "keyword":
                # Waiting chunks have no vector: only keyword hits can be among them.
                waiting.append(waiting_of([*stage.keyword, *stage.first_chunk.values()],
                                          reader))

        await index.run(words)

    # The two retrievers run side by side: embedding the query overlaps the BM25 query.
    async with anyio.create_task_group() as tg:
        if mode != "keyword":
            tg.start_soon(by_meaning, name="pocketmcp.search.vector")
        if mode != "vector":
            tg.start_soon(by_words, name="pocketmcp.search.keyword")
    if notice is not None and mode == "vector":
        await by_words()  # keywords alone, by their own scale
    return stage, (query_vector[0] if query_vector else None), notice


# The share of a search's remaining time its query's embedding may take when the search can
# answer by keywords instead: a provider that stops answering leaves the rest of the deadline
# to the keyword results, rather than ending the search with DEADLINE_EXCEEDED.
EMBED_SHARE = 0.5


async def _embedded(reading: Reading, query: str, params: Params, fallback: bool
                    ) -> tuple[npt.NDArray[np.float32], float]:
    """The query's vector and the model's background similarity; with `fallback`, an
    EmbeddingError when they take more than EMBED_SHARE of the time left."""
    left = deadline.remaining()
    limit = None if left is None or not fallback else left * EMBED_SHARE
    with anyio.move_on_after(limit) as bounded:
        vector = await reading.embedder.embed_query(query)
        base = await model_background(reading.embedder) if params.calibrated else 0.0
        return vector, base
    assert limit is not None and bounded.cancelled_caught
    raise EmbeddingError(f"no embedding within {limit:.2g} s, half the time the search had "
                         "left (SEARCH_TIMEOUT_S)")


async def _ranked(reading: Reading, query: str, **kw: Any
                  ) -> tuple[list[Hit], str | None, str | None, bool]:
    """`_ranked_once`, again (twice at most) when chunks it ranked were gone between its
    stages and its rows (their document changed or was removed meanwhile; a chunk getting
    its vector keeps its id)."""
    embedded: Embedded | None = None  # the query is embedded once: a retry only retrieves
    for _ in range(3):
        hits, notice, pending, floored, gone, embedded = await _ranked_once(
            reading, query, embedded=embedded, **kw)
        if not gone:
            break
    return hits, notice, pending, floored


async def _ranked_once(reading: Reading, query: str, *, top_k: int,
                       scope: Scope | None = None, score_threshold: float | None = None,
                       mode: Mode = "hybrid", unique_docs: bool = False, context: int = 0,
                       params: Params = DEFAULT_PARAMS, exact: bool = False,
                       per_doc: int = 0, fallback: bool = True, strict: bool = False,
                       embedded: Embedded | None = None,
                       ) -> tuple[list[Hit], str | None, str | None, bool, bool, Embedded | None]:
    """The best hits, a notice when they are keyword hits only because the query could
    not be embedded, one when chunks wait for their vectors (ops/pending.py), whether the
    hits are under the threshold (kept anyway), whether chunks it ranked were gone, and the
    query as embedded; with
    `exact`, vector scores come from the stored float32 vectors (a
    lookup per hit, about 0.3 ms each at 50k chunks) instead of the float16 copies. With
    `per_doc`, at most that many hits per document, neighbours merged; when the threshold
    removes every hit, the best few anyway (not with `strict`) and a notice."""
    index = reading.index
    # Documents can hold many chunks: look deeper when only one per document is kept.
    depth = max(params.depth, top_k * (4 if unique_docs else 1))
    pending: list[tuple[int, set[int]]] = []
    stage, query_vector, notice = await gather(
        reading, query, mode=mode, depth=depth, scope=scope, params=params,
        unique_docs=unique_docs, fallback=fallback, embedded=embedded, waiting=pending)
    embedded = (query_vector, stage.vector_background, notice) if mode != "keyword" else None
    asked = mode
    if notice is not None:
        mode, score_threshold = "keyword", None
    scores = fuse(stage, mode, params, unique_docs)
    waiting_count, waiting = pending[0] if pending else (0, set[int]())
    if mode == "hybrid":
        keywords_alone(stage, scores, waiting, params)
    order: list[int] = []
    seen_docs: set[int] = set()
    for chunk_id in fusion.ranked(scores):
        doc = stage.doc_of[chunk_id]
        if unique_docs and doc in seen_docs:
            continue
        seen_docs.add(doc)
        order.append(chunk_id)
        # Spares: a chunk removed by a commit since the stages ran is skipped, not missed.
        if len(order) == top_k * (4 if per_doc else 2):
            break
    words = stage.doc_keyword if unique_docs and stage.doc_keyword else None
    base = background_of(stage, params)
    stat_cache: dict[int, bool | None] = {}
    removed = floor.Removed(score_threshold or 0.0)
    gone: list[int] = []  # ranked, then removed by a commit before their rows were read
    floored: list[bool] = []  # the threshold removed every hit: the best kept anyway

    def stale_of(row: HitRow) -> bool | None:
        if row.doc_id not in stat_cache:  # one stat per document, in this worker thread
            stat_cache[row.doc_id] = is_stale(index.root, row.external_id, row.source,
                                              row.size_bytes, row.mtime_ns)
        return stat_cache[row.doc_id]

    def details(reader: Reader) -> list[Hit]:
        # A hybrid match found by words alone gets its cosine from the stored vector, so
        # that its score weighs both; `exact` rescores every returned vector score.
        missing = [c for c in order if c not in stage.vector] if (
            mode == "hybrid" and query_vector is not None) else []
        looked_up = _exact_scores(reader, index, missing, query_vector) if (
            missing and query_vector is not None) else {}
        rows = reader.hits(order)  # gone since the stages ran: not there, and skipped
        gone.extend(c for c in order if c not in rows)
        kept: list[tuple[int, float]] = []
        spans: dict[int, list[list[int]]] = {}  # doc -> [first, last, place in kept]
        for chunk_id in order:
            vec = looked_up.get(chunk_id, stage.vector.get(chunk_id))
            kw = words.get(stage.doc_of[chunk_id]) if words is not None else (
                stage.keyword.get(chunk_id))
            score = relevance(vec, kw, "keyword" if chunk_id in waiting else mode, params,
                              stage.keyword_ref, base)
            if chunk_id not in rows:
                continue
            if score_threshold is not None and score < score_threshold:
                removed.add(chunk_id, score)
                continue
            if per_doc:
                row = rows[chunk_id]
                doc_spans = spans.setdefault(row.doc_id, [])
                near = next((sp for sp in doc_spans
                             if sp[0] - 1 <= row.idx <= sp[1] + 1), None)
                if near is not None:  # a neighbour of a better match: one passage
                    near[0], near[1] = min(near[0], row.idx), max(near[1], row.idx)
                    continue
                if len(doc_spans) >= per_doc:
                    continue
                doc_spans.append([row.idx, row.idx, len(kept)])
            kept.append((chunk_id, score))
            if len(kept) == top_k:
                break
        if not kept and removed.under and not strict:
            floored.append(True)
            kept = floor.kept_anyway(removed, stage.doc_of, set(rows), min(top_k,
                                                                             floor.FLOOR_KEEP))
        merged = {kept[sp[2]][0]: (sp[0], sp[1]) for doc_spans in spans.values()
                  for sp in doc_spans if sp[0] != sp[1]}
        chosen = [c for c, _ in kept]
        rescored = _exact_scores(reader, index, chosen, query_vector) if (
            exact and query_vector is not None) else {}
        found = []
        for chunk_id, score in kept:
            if chunk_id not in rows:
                continue
            vector_score = rescored.get(chunk_id, looked_up.get(
                chunk_id, stage.vector.get(chunk_id)))
            if rescored and mode == "vector" and vector_score is not None:
                score = relevance(vector_score, None, mode, params, stage.keyword_ref, base)
            first, last = merged.get(chunk_id, (-1, -1))
            row = rows[chunk_id]
            found.append(Hit(row, score, vector_score, stage.keyword.get(chunk_id),
                              first=first, last=last, stale=stale_of(row)))
        if rescored and mode == "vector":
            found.sort(key=lambda h: -h.score)
        found = with_passages(reader, found)
        return with_context(reader, found, context) if context and found else found

    hits = await index.run(details) if order else []
    if not hits:
        reading.require_complete()
    if removed.under and not any(h.score >= removed.threshold for h in hits):
        notice = floor.joined(notice, floor.notice(removed, len(hits)))
    return (hits, notice, pending_notice(waiting_count, asked), bool(floored and hits),
            bool(gone), embedded)


def _exact_scores(reader: Reader, index: ReadIndex, chunk_ids: Sequence[int],
                  query: npt.NDArray[np.float32]) -> dict[int, float]:
    """Cosine similarities from the stored float32 vectors (the vector file's are float16)."""
    ids, _, vectors = reader.vectors_by_ids(chunk_ids, index.dim)
    with one_blas_thread():  # a few rows: BLAS threads would cost far more (blas.py)
        # Row by row: a matrix product's rounding of a row depends on the rows beside it,
        # so a chunk's score would change with the others asked for (or their order).
        scores = np.vecdot(vectors, query)
    return dict(zip(ids.tolist(), scores.tolist(), strict=True))


def _vector_stage(index: ReadIndex, reader: Reader, stage: Stage,
                  vector: npt.NDArray[np.float32], depth: int, allowed: list[int] | None,
                  params: Params, waiting: list[tuple[int, set[int]]] | None = None) -> None:
    """Nearest chunks by meaning into `stage` (blocking); with `waiting`, how many chunks
    wait for their vectors is added to it (none of the nearest can)."""
    ids, scores, doc_ids = index.nearest(reader, vector, depth,
                                         candidates_for(index.live, params), allowed)
    if waiting is not None:
        waiting.append((reader.waiting_count(), set()))
    stage.vector = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    stage.doc_of.update(zip(ids.tolist(), doc_ids.tolist(), strict=True))


def _keyword_stage(reader: Reader, stage: Stage, query: str, depth: int,
                   allowed: list[int] | None, params: Params, total: int,
                   documents: bool, *, alone: bool = False) -> None:
    """Best chunks (and with `documents`, best whole documents) by words into `stage`;
    `alone` when nothing else of the search runs meanwhile (keyword mode)."""
    found = reader.keyword_stage(query, depth, allowed, title_weight=params.title_weight,
                                 total=total, documents=documents, alone=alone)
    stage.keyword_ref = found.reference
    stage.keyword.update(found.keyword)
    stage.doc_of.update(found.doc_of)
    if documents:
        stage.doc_keyword = found.doc_keyword
        stage.first_chunk = found.first_chunk


def candidates_for(live: int, params: Params) -> int:
    """Rows rescored in float16 after the 1-bit passes: 0.2% of the index, at least 1000."""
    return params.candidates or max(1000, live // 500)
