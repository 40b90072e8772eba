"""Search over the index: the one code path behind the MCP tool, the CLI and `eval`.

Modes: `vector` (in-memory two-pass scan, exact rescoring from SQLite), `keyword` (FTS5
BM25 over chunk text and document title) and `hybrid` (both, fused). Documents rank at their
best chunk when `unique_docs` is set; `context` adds neighbouring chunks to each match.
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
from pocketmcp.core.safe import preview
from pocketmcp.messages import rel_of
from pocketmcp.service import NotReady, Service
from pocketmcp.store.queries import HitRow, IndexReader, Scalar

Mode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")


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


class Filter(msgspec.Struct, frozen=True, kw_only=True):
    doc_ids: tuple[int, ...] | None = None
    path_glob: str | None = None
    library: str | None = None
    metadata: dict[str, Scalar] | None = None


class Match(msgspec.Struct, frozen=True, kw_only=True):
    chunk_id: int
    doc_id: int
    idx: int
    score: float
    vector_score: float | None
    keyword_score: float | None
    preview: str
    resource: str
    path: str | None
    title: str
    start_off: int
    end_off: int
    text: str
    section: str = ""
    library: str = ""
    context: str | None = None


def path_of(external_id: str, source: str) -> str | None:
    """A file's path: relative for watched files, absolute for ingested ones."""
    if source != "file":
        return None
    if external_id.startswith("path:"):
        return external_id.split(":", 2)[2]
    return rel_of(external_id)


def _glob_doc_ids(reader: IndexReader, glob: str) -> list[int]:
    """Documents whose path (files) or external id (others) matches a gitignore-style glob."""
    spec = pathspec.PathSpec.from_lines("gitignore", [glob])
    out = []
    for doc_id, ext in reader.all_external_ids():
        name = (path_of(ext, "file") if ext.startswith(("file:", "path:")) else None) or ext
        if spec.match_file(name):
            out.append(doc_id)
    return out


def _allowed(reader: IndexReader, flt: Filter | None) -> list[int] | None:
    if flt is None:
        return None
    allowed: list[int] | None = None
    if flt.doc_ids is not None:
        allowed = sorted(set(flt.doc_ids))
    if flt.path_glob:
        matching = _glob_doc_ids(reader, flt.path_glob)
        allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
    if flt.library is not None or flt.metadata:
        matching = reader.doc_ids_where(flt.library, flt.metadata)
        allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
    return allowed


class _Stage(msgspec.Struct):
    vector: dict[int, float]
    keyword: dict[int, float]
    doc_of: dict[int, int]
    doc_keyword: dict[int, float] = msgspec.field(default_factory=dict)
    first_chunk: dict[int, int] = msgspec.field(default_factory=dict)


async def search(service: Service, query: str, *, top_k: int = 8, flt: Filter | None = None,
                 score_threshold: float | None = None, mode: Mode = "hybrid",
                 unique_docs: bool = False, context: int = 0,
                 params: Params = DEFAULT_PARAMS) -> list[Match]:
    """Best matches first. Waits (bounded) for the model and the index."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    indexed = await service.wait_indexed()
    assert service.engine is not None
    embedder = service.engine.embedder
    # Documents can hold many chunks: look deeper when only one per document is kept.
    depth = max(params.depth, top_k * (4 if unique_docs else 1))
    stage = _Stage({}, {}, {})
    # The filter's documents, worked out once for both retrievers.
    allowed = None if flt is None else await service.readers.run(
        lambda reader: _allowed(reader, flt))

    async def by_meaning() -> None:
        vector = await anyio.to_thread.run_sync(embedder.embed_query, query,
                                                limiter=service.query_limiter)
        await service.readers.run(
            lambda reader: _vector_stage(service, reader, stage, vector, depth, allowed,
                                         params))

    async def by_words() -> None:
        await service.readers.run(
            lambda reader: _keyword_stage(reader, stage, query, depth, allowed, params,
                                          service.vectors.live,
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

    def details(reader: IndexReader) -> list[Match]:
        hits = reader.hits(chosen)  # details only for what is returned
        found = [_match(hits[c], scores[c], stage.vector.get(c), stage.keyword.get(c))
                 for c in chosen if c in hits]
        return _with_context(reader, found, context) if context and found else found

    matches = await service.readers.run(details) if chosen else []
    if not matches and not indexed:
        raise NotReady("index still loading: the first scan of the folder has not finished "
                       "and nothing matches yet; try again in a few seconds")
    return matches


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


def _vector_stage(service: Service, reader: IndexReader, stage: _Stage,
                  vector: npt.NDArray[np.float32], depth: int, allowed: list[int] | None,
                  params: Params) -> None:
    """Nearest chunks by meaning into `stage` (blocking)."""
    index = service.vectors
    index.sync(reader)
    docs = None if allowed is None else np.asarray(allowed, dtype=np.int64)
    ids, scores, doc_ids = index.search(vector, depth, candidates_for(index.live, params), docs)
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


def _match(hit: HitRow, score: float, vector_score: float | None,
           keyword_score: float | None) -> Match:
    return Match(
        chunk_id=hit.chunk_id, doc_id=hit.doc_id, idx=hit.idx, score=round(score, 6),
        vector_score=None if vector_score is None else round(vector_score, 6),
        keyword_score=None if keyword_score is None else round(keyword_score, 6),
        preview=preview(hit.text), resource=f"mcp+doc://{hit.doc_id}#{hit.chunk_id}",
        path=path_of(hit.external_id, hit.source), title=hit.title, start_off=hit.start_off,
        end_off=hit.end_off, text=hit.text, section=hit.section, library=hit.library,
    )


def _with_context(reader: IndexReader, matches: Sequence[Match], around: int) -> list[Match]:
    """Each match with the text of up to `around` chunks before and after it, joined at their
    offsets so overlaps are not repeated."""
    out = []
    for m in matches:
        parts = reader.neighbours(m.doc_id, max(0, m.idx - around), m.idx + around)
        text, end = "", -1
        for _idx, start, stop, chunk in parts:
            if end < 0:
                text, end = chunk, stop
            elif stop > end:
                text += chunk[max(0, end - start):] if start < end else "\n\n" + chunk
                end = stop
        out.append(msgspec.structs.replace(m, context=text))
    return out
