"""The fuse step: from the two retrievers' lists to one ranking and one score (pure functions).

The ranking fuses the vector and keyword lists as `Params` says. The `score` a match shows is
a relevance in 0..1 with one meaning in every mode, whatever the corpus or the query:

- vector: the cosine similarity read against the model's background (`core.calibration`):
  (cosine - background) / (1 - background), clipped to 0..1, so an unrelated text scores
  about 0 with any model;
- keyword: BM25 divided by the BM25 a text of average length gets for holding each query
  word once (`keywords.reference_bm25`), as x / (1 + x): 0.5 for that text, towards 1 for more;
- hybrid: the vector and keyword relevances weighted by `vector_weight`.

Documents are written for keyword search as soon as they are chunked, and get their vectors
later (pipeline/embedder.py). Until then their chunks are in no vector list: a hybrid search
ranks such a chunk by its keywords alone, at their full weight (fused with the vector list,
it would count as no match by meaning), so the two kinds of chunk make one list.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Literal

import msgspec

from pocketmcp.core import fusion
from pocketmcp.core.calibration import calibrated
from pocketmcp.core.fusion import RRF_K

Mode = Literal["hybrid", "vector", "keyword"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "keyword")


class Params(msgspec.Struct, frozen=True, kw_only=True):
    """Tuning of the search stages; defaults chosen by cross-validation on SciFact's training
    split (`bench/cv_search.py`)."""

    fusion: Literal["convex", "rrf"] = "convex"
    vector_weight: float = 0.5  # weight of the vector list; keyword gets the rest
    rrf_k: int = RRF_K
    depth: int = 200  # results taken from each list before fusion
    candidates: int = 0  # rows the vector scan rescores in float16; 0: by index size
    title_weight: float = 1.0  # BM25 weight of the section path or title against the text
    # convex: how each list is scaled; "relevance" uses the 0..1 scores described above.
    normalise: Literal["minmax", "zscore", "relevance"] = "relevance"  # chosen in every fold
    document_keywords: bool = True  # one match per document: BM25 over whole documents...
    best_chunk_from: float = 6.0  # ...unless the index has this many chunks a document or
    # more: then its best chunk's (search/shape.py; cross-validated, docs/search.md), and
    document_mean: float = 0.3  # there, a document's mean cosine over all its chunks weighs
    # this much in its score by meaning, its best chunk's the rest
    calibrated: bool = True  # cosines read against the model's background (False: as they are)


DEFAULT_PARAMS = Params()


class Stage(msgspec.Struct, frozen=True):
    """What the retrievers found for one query: chunk id -> raw score, per list; `doc_of`
    knows the document of every chunk named (the documents' first chunks too)."""

    vector: dict[int, float]
    keyword: dict[int, float]
    doc_of: dict[int, int]
    doc_keyword: dict[int, float] = msgspec.field(default_factory=dict)
    first_chunk: dict[int, int] = msgspec.field(default_factory=dict)
    keyword_ref: float = 1.0  # `reference_bm25` of the query's words
    vector_background: float = 0.0  # the model's cosine for unrelated texts
    doc_vector: dict[int, float] = msgspec.field(default_factory=dict)  # doc -> mean cosine

    def __post_init__(self) -> None:
        for doc, chunk_id in self.first_chunk.items():
            self.doc_of.setdefault(chunk_id, doc)


def vector_relevance(cosine: float, background: float = 0.0) -> float:
    return calibrated(cosine, background)


def background_of(stage: Stage, params: Params) -> float:
    """The background the stage's cosines are read against (0 when not calibrated)."""
    return stage.vector_background if params.calibrated else 0.0


def keyword_relevance(bm25: float, reference: float) -> float:
    x = max(0.0, bm25) / reference
    return x / (1.0 + x)


def relevance(vector_score: float | None, keyword_score: float | None, mode: Mode,
              params: Params, reference: float, background: float = 0.0) -> float:
    """The 0..1 score a match shows (a missing score counts as no evidence)."""
    vec = vector_relevance(vector_score, background) if vector_score is not None else 0.0
    words = keyword_relevance(keyword_score, reference) if keyword_score is not None else 0.0
    if mode == "vector":
        return vec
    if mode == "keyword":
        return words
    return params.vector_weight * vec + (1 - params.vector_weight) * words


def fuse(stage: Stage, mode: Mode, params: Params, unique_docs: bool) -> dict[int, float]:
    """Ranking scores by chunk id (higher first); one chunk per document with `unique_docs`."""
    if unique_docs and mode != "vector":
        return _fuse_by_document(stage, params, mode)
    return _fuse(stage, mode, params)


def _lists(stage: Stage, vector: dict[int, float], words: dict[int, float],
           params: Params) -> list[dict[int, float]]:
    if params.normalise != "relevance":
        return [vector, words]
    base = background_of(stage, params)
    return [{k: vector_relevance(v, base) for k, v in vector.items()},
            {k: keyword_relevance(v, stage.keyword_ref) for k, v in words.items()}]


def _combine(stage: Stage, vector: dict[int, float], words: dict[int, float],
             params: Params) -> dict[int, float]:
    weights = [params.vector_weight, 1 - params.vector_weight]
    if params.fusion == "rrf":
        return fusion.rrf([fusion.ranked(vector), fusion.ranked(words)], weights, params.rrf_k)
    lists = _lists(stage, vector, words, params)
    normalise = "none" if params.normalise == "relevance" else params.normalise
    return fusion.convex(lists, weights, normalise)


def _fuse(stage: Stage, mode: Mode, params: Params) -> dict[int, float]:
    if mode == "vector":
        return stage.vector
    if mode == "keyword":
        return stage.keyword
    return _combine(stage, stage.vector, stage.keyword, params)


def _fuse_by_document(stage: Stage, params: Params, mode: Mode) -> dict[int, float]:
    """Scores when one match per document is wanted. A document's best chunk for meaning
    (blended with its mean over all its chunks, when the stage has it) and its BM25 as a
    whole (or its best chunk for words) are fused, and the document is shown by its chunk
    that fuses best (its first chunk when only the document matched)."""
    words = stage.doc_keyword or best_per_doc(stage.keyword, stage.doc_of)
    if mode == "keyword":
        doc_scores = words
    else:
        meaning = best_per_doc(stage.vector, stage.doc_of)
        if stage.doc_vector:  # an index of long pages: the whole document's meaning too
            share = params.document_mean
            meaning = {doc: (1 - share) * best + share * stage.doc_vector.get(doc, best)
                       for doc, best in meaning.items()}
        doc_scores = _combine(stage, meaning, words, params)
    chunk_scores = _fuse(stage, mode, params)
    best: dict[int, int] = {}
    for chunk_id in fusion.ranked(chunk_scores):
        best.setdefault(stage.doc_of[chunk_id], chunk_id)
    for doc, chunk_id in stage.first_chunk.items():
        best.setdefault(doc, chunk_id)
    return {chunk_id: doc_scores[doc] for doc, chunk_id in best.items() if doc in doc_scores}


def best_per_doc(scores: dict[int, float], doc_of: dict[int, int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for chunk_id, score in scores.items():
        doc = doc_of[chunk_id]
        if score > out.get(doc, float("-inf")):
            out[doc] = score
    return out


def truncated(stage: Stage, depth: int) -> Stage:
    """The stage as a search with a smaller `depth` would have found it (lists are kept
    best-first, so taking their heads is exact)."""
    def head(scores: dict[int, float]) -> dict[int, float]:
        return {k: scores[k] for k in fusion.ranked(scores)[:depth]}

    doc_keyword = head(stage.doc_keyword)
    return msgspec.structs.replace(
        stage, vector=head(stage.vector), keyword=head(stage.keyword), doc_keyword=doc_keyword,
        doc_of=dict(stage.doc_of),
        first_chunk={d: c for d, c in stage.first_chunk.items() if d in doc_keyword})


def keywords_alone(stage: Stage, scores: dict[int, float], waiting: AbstractSet[int],
                   params: Params) -> dict[int, float]:
    """`scores` with the fused score of each waiting chunk whose document has no vector
    match given its keywords' full weight."""
    share = 1.0 - params.vector_weight
    if not waiting or not 0.0 < share < 1.0:
        return scores
    by_meaning = {stage.doc_of[c] for c in stage.vector}
    return {chunk_id: score / share if chunk_id in waiting and stage.doc_of.get(chunk_id)
            not in by_meaning else score for chunk_id, score in scores.items()}


def ranked(stage: Stage, scores: dict[int, float], *, unique_docs: bool, most: int
           ) -> list[int]:
    """The best `most` chunks by `scores` (one per document with `unique_docs`)."""
    order: list[int] = []
    seen_docs: set[int] = set()
    for chunk_id in fusion.ranked(scores):
        doc = stage.doc_of[chunk_id]
        if unique_docs and doc in seen_docs:
            continue
        seen_docs.add(doc)
        order.append(chunk_id)
        if len(order) == most:
            break
    return order


def shown(stage: Stage, chunk_id: int, vector_score: float | None, mode: Mode,
          params: Params, *, by_document: bool, waiting: AbstractSet[int]) -> float:
    """The score a ranked chunk shows (`relevance`): with `by_document`, its document's
    keyword score; a chunk waiting for its vector is scored by its keywords."""
    words = stage.doc_keyword.get(stage.doc_of[chunk_id]) if by_document else (
        stage.keyword.get(chunk_id))
    return relevance(vector_score, words, "keyword" if chunk_id in waiting else mode, params,
                     stage.keyword_ref, background_of(stage, params))
