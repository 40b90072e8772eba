"""Search over an index: the one code path behind `search`, `find_similar_documents`, the
CLI and `eval`.

Modes: `vector` (in-memory two-pass scan over float16 copies, within about 0.001 of the exact
cosine; `find_similar_documents` rescores what it returns from the stored float32 vectors),
`keyword` (FTS5 BM25 over chunk text and document title) and `hybrid` (both, fused).
Documents rank at their best chunk when `unique_docs` is set; `context` adds neighbouring
chunks to each match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import anyio
import msgspec
import numpy as np
import numpy.typing as npt
import pathspec

from pocketmcp.core import fusion
from pocketmcp.core.fusion import RRF_K
from pocketmcp.core.keywords import fts_query, terms, vocab_terms
from pocketmcp.core.paths import path_of
from pocketmcp.core.safe import preview, safe_text
from pocketmcp.errors import InvalidRequest
from pocketmcp.ops.checks import check_metadata_filter
from pocketmcp.ops.results import (
    FindSimilarResult,
    SearchFilter,
    SearchMatch,
    SearchResult,
    SimilarChunk,
)
from pocketmcp.runtime import Open, Reading
from pocketmcp.store.queries import HitRow, IndexReader
from pocketmcp.store.readers import ReadIndex

Mode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")
MAX_SIMILAR = 100


class Params(msgspec.Struct, frozen=True, kw_only=True):
    """Tuning of the search stages; defaults chosen by `pocketmcp eval` on SciFact."""

    fusion: Literal["convex", "rrf"] = "convex"
    vector_weight: float = 0.6  # convex: weight of the vector list; keyword gets the rest
    rrf_k: int = RRF_K
    depth: int = 100  # results taken from each list before fusion
    candidates: int = 0  # rows kept by the 1-bit pass of the vector scan; 0: by index size
    title_weight: float = 1.0  # BM25 weight of the document title against the chunk text
    normalise: Literal["minmax", "zscore"] = "zscore"  # convex: how each list is scaled
    document_keywords: bool = True  # one match per document: BM25 over whole documents


DEFAULT_PARAMS = Params()


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """Which documents a search may return (None: no limit of that kind)."""

    doc_ids: tuple[int, ...] | None = None
    path_glob: str | None = None
    library: str | None = None
    metadata: dict[str, str | int | float | bool] | None = None

    @classmethod
    def of(cls, flt: SearchFilter | None, library: str | None) -> Scope | None:
        """The scope of a tool's `filter` and `library` arguments; None when unscoped."""
        meta = check_metadata_filter(flt.metadata) if flt is not None else None
        doc_ids = tuple(flt.doc_ids) if flt is not None and flt.doc_ids is not None else None
        glob = flt.path_glob if flt is not None and flt.path_glob else None
        if library is None and doc_ids is None and glob is None and not meta:
            return None
        return cls(doc_ids=doc_ids, path_glob=glob, library=library, metadata=meta)


class _Hit(msgspec.Struct, frozen=True):
    row: HitRow
    score: float
    vector_score: float | None
    keyword_score: float | None
    context: str | None = None


class _Stage(msgspec.Struct):
    vector: dict[int, float]
    keyword: dict[int, float]
    doc_of: dict[int, int]
    doc_keyword: dict[int, float] = msgspec.field(default_factory=dict)
    first_chunk: dict[int, int] = msgspec.field(default_factory=dict)


async def search(reading: Reading, query: str, *, top_k: int = 8, scope: Scope | None = None,
                 score_threshold: float | None = None, mode: Mode = "hybrid",
                 unique_docs: bool = False, context: int = 0,
                 params: Params = DEFAULT_PARAMS) -> SearchResult:
    """The best matches for `query`, best first."""
    hits = await _ranked(reading, query, top_k=top_k, scope=scope,
                         score_threshold=score_threshold, mode=mode, unique_docs=unique_docs,
                         context=context, params=params)
    return SearchResult(matches=[_match(h) for h in hits])


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
    hits = await _ranked(await open_reading(), query, top_k=top_k, mode="vector", exact=True)
    return FindSimilarResult(results=[
        SimilarChunk(chunk_id=h.row.chunk_id, doc_id=h.row.doc_id, text=h.row.text,
                     score=round(h.score, 6)) for h in hits])


async def _ranked(reading: Reading, query: str, *, top_k: int, scope: Scope | None = None,
                  score_threshold: float | None = None, mode: Mode = "hybrid",
                  unique_docs: bool = False, context: int = 0,
                  params: Params = DEFAULT_PARAMS, exact: bool = False) -> list[_Hit]:
    """The best hits; with `exact`, vector scores come from the stored float32 vectors (a
    lookup per hit, about 0.3 ms each at 50k chunks) instead of the float16 copies."""
    if mode not in MODES:
        raise InvalidRequest(f"mode must be one of {', '.join(MODES)}")
    index = reading.index
    # Documents can hold many chunks: look deeper when only one per document is kept.
    depth = max(params.depth, top_k * (4 if unique_docs else 1))
    stage = _Stage({}, {}, {})
    # The scope's documents, worked out once for both retrievers.
    allowed = None if scope is None else await index.run(lambda r: _allowed(r, scope))
    query_vector: list[npt.NDArray[np.float32]] = []

    async def by_meaning() -> None:
        vector = await reading.embedder.embed_query(query)
        query_vector.append(vector)
        await index.run(lambda r: _vector_stage(index, r, stage, vector, depth, allowed,
                                                params))

    async def by_words() -> None:
        await index.run(lambda r: _keyword_stage(r, stage, query, depth, allowed, params,
                                                 index.vectors.live,
                                                 unique_docs and params.document_keywords))

    # The two retrievers run side by side: embedding the query overlaps the BM25 query.
    async with anyio.create_task_group() as tg:
        if mode != "keyword":
            tg.start_soon(by_meaning, name="pocketmcp.search.vector")
        if mode != "vector":
            tg.start_soon(by_words, name="pocketmcp.search.keyword")
    scores = _fuse_by_document(stage, params, mode) if unique_docs and mode != "vector" else (
        _fuse(stage, mode, params))
    chosen: list[int] = []
    seen_docs: set[int] = set()
    for chunk_id in fusion.ranked(scores):
        doc = stage.doc_of[chunk_id]
        if unique_docs and doc in seen_docs:
            continue
        if score_threshold is not None and scores[chunk_id] < score_threshold:
            break
        seen_docs.add(doc)
        chosen.append(chunk_id)
        if len(chosen) == top_k:
            break

    def details(reader: IndexReader) -> list[_Hit]:
        rows = reader.hits(chosen)  # details only for what is returned
        rescored = _exact_scores(reader, index, chosen, query_vector[0]) if (
            exact and query_vector) else {}
        found = []
        for chunk_id in chosen:
            if chunk_id not in rows:
                continue
            vector_score = rescored.get(chunk_id, stage.vector.get(chunk_id))
            score = vector_score if mode == "vector" and vector_score is not None else (
                scores[chunk_id])
            found.append(_Hit(rows[chunk_id], score, vector_score,
                              stage.keyword.get(chunk_id)))
        if rescored and mode == "vector":
            found.sort(key=lambda h: -h.score)
        return _with_context(reader, found, context) if context and found else found

    hits = await index.run(details) if chosen else []
    if not hits:
        reading.require_complete()
    return hits


def _exact_scores(reader: IndexReader, index: ReadIndex, chunk_ids: Sequence[int],
                  query: npt.NDArray[np.float32]) -> dict[int, float]:
    """Cosine similarities from the stored float32 vectors (the in-memory ones are float16)."""
    ids, _, vectors = reader.vectors_by_ids(chunk_ids, index.dim)
    return dict(zip(ids.tolist(), (vectors @ query).tolist(), strict=True))


def _glob_doc_ids(reader: IndexReader, glob: str) -> list[int]:
    """Documents whose path (files) or external id (others) matches a gitignore-style glob."""
    spec = pathspec.PathSpec.from_lines("gitignore", [glob])
    out = []
    for doc_id, ext in reader.all_external_ids():
        name = (path_of(ext, "file") if ext.startswith(("file:", "path:")) else None) or ext
        if spec.match_file(name):
            out.append(doc_id)
    return out


def _allowed(reader: IndexReader, scope: Scope) -> list[int] | None:
    allowed: list[int] | None = None
    if scope.doc_ids is not None:
        allowed = sorted(set(scope.doc_ids))
    if scope.path_glob:
        matching = _glob_doc_ids(reader, scope.path_glob)
        allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
    if scope.library is not None or scope.metadata:
        matching = reader.doc_ids_where(scope.library, scope.metadata)
        allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
    return allowed


def _fuse_by_document(stage: _Stage, params: Params, mode: Mode) -> dict[int, float]:
    """Scores when one match per document is wanted. A document's best chunk for meaning and
    its BM25 as a whole (or its best chunk for words) are fused, and the document is shown
    by its chunk that fuses best (its first chunk when only the document matched)."""
    words = stage.doc_keyword or _best_per_doc(stage.keyword, stage.doc_of)
    if mode == "keyword":
        doc_scores = fusion.minmax(words)
    else:
        per_doc = [_best_per_doc(stage.vector, stage.doc_of), words]
        weights = [params.vector_weight, 1 - params.vector_weight]
        if params.fusion == "rrf":
            doc_scores = fusion.rrf([fusion.ranked(d) for d in per_doc], weights,
                                    params.rrf_k)
        else:
            doc_scores = fusion.convex(per_doc, weights, params.normalise)
    chunk_scores = _fuse(stage, mode, params)
    best: dict[int, int] = {}
    for chunk_id in fusion.ranked(chunk_scores):
        best.setdefault(stage.doc_of[chunk_id], chunk_id)
    for doc, chunk_id in stage.first_chunk.items():
        if doc not in best:
            best[doc] = chunk_id
            stage.doc_of[chunk_id] = doc
    return {chunk_id: doc_scores[doc] for doc, chunk_id in best.items() if doc in doc_scores}


def _best_per_doc(scores: dict[int, float], doc_of: dict[int, int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for chunk_id, score in scores.items():
        doc = doc_of[chunk_id]
        if score > out.get(doc, float("-inf")):
            out[doc] = score
    return out


def _fuse(stage: _Stage, mode: Mode, params: Params) -> dict[int, float]:
    if mode == "vector":
        return stage.vector
    if mode == "keyword":
        return fusion.minmax(stage.keyword)
    weights = [params.vector_weight, 1 - params.vector_weight]
    if params.fusion == "rrf":
        return fusion.rrf([fusion.ranked(stage.vector), fusion.ranked(stage.keyword)],
                          weights, params.rrf_k)
    return fusion.convex([stage.vector, stage.keyword], weights, params.normalise)


def _vector_stage(index: ReadIndex, reader: IndexReader, stage: _Stage,
                  vector: npt.NDArray[np.float32], depth: int, allowed: list[int] | None,
                  params: Params) -> None:
    """Nearest chunks by meaning into `stage` (blocking)."""
    vectors = index.vectors
    vectors.sync(reader)
    docs = None if allowed is None else np.asarray(allowed, dtype=np.int64)
    ids, scores, doc_ids = vectors.search(vector, depth, candidates_for(vectors.live, params),
                                          docs)
    stage.vector = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    stage.doc_of.update(zip(ids.tolist(), doc_ids.tolist(), strict=True))


def _keyword_stage(reader: IndexReader, stage: _Stage, query: str, depth: int,
                   allowed: list[int] | None, params: Params, total: int,
                   documents: bool) -> None:
    """Best chunks (and with `documents`, best whole documents) by BM25 into `stage`."""
    words = terms(query)
    if not words:
        return
    match = fts_query(query, reader.term_docs(vocab_terms(words)), total)
    if match is None:
        return
    for chunk_id, score, doc_id in reader.search_keyword(match, depth, allowed,
                                                         params.title_weight):
        stage.keyword[chunk_id] = score
        stage.doc_of[chunk_id] = doc_id
    if documents:
        stage.doc_keyword = dict(reader.search_documents(match, depth, allowed,
                                                         params.title_weight))
        stage.first_chunk = reader.first_chunks(sorted(stage.doc_keyword))


def candidates_for(live: int, params: Params) -> int:
    """Rows that survive the 1-bit pass: 1% of the index, at least 2000."""
    return params.candidates or max(2000, live // 100)


def _match(hit: _Hit) -> SearchMatch:
    row = hit.row
    return SearchMatch(
        chunk_id=row.chunk_id, doc_id=row.doc_id, idx=row.idx, score=round(hit.score, 6),
        vector_score=None if hit.vector_score is None else round(hit.vector_score, 6),
        keyword_score=None if hit.keyword_score is None else round(hit.keyword_score, 6),
        preview=preview(row.text), resource=f"mcp+doc://{row.doc_id}#{row.chunk_id}",
        path=path_of(row.external_id, row.source), title=row.title, start_off=row.start_off,
        end_off=row.end_off, section=row.section, library=row.library, context=hit.context,
    )


def _with_context(reader: IndexReader, hits: Sequence[_Hit], around: int) -> list[_Hit]:
    """Each hit with the text of up to `around` chunks before and after it, joined at their
    offsets so overlaps are not repeated."""
    out = []
    for h in hits:
        row = h.row
        parts = reader.neighbours(row.doc_id, max(0, row.idx - around), row.idx + around)
        text, end = "", -1
        for _idx, start, stop, chunk in parts:
            if end < 0:
                text, end = chunk, stop
            elif stop > end:
                text += chunk[max(0, end - start):] if start < end else "\n\n" + chunk
                end = stop
        out.append(msgspec.structs.replace(h, context=text))
    return out
