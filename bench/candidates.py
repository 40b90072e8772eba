"""The ranking candidates `quality_cv.py` compares, over cached vectors and keyword lists.

Every candidate ends in the search op's own fusion (`search.fuse`, one match per
document); what it changes is the vector list it hands over (a second query vector, a
document's score rolled up from several chunks), the keyword lists (gathered another way:
a title weight, a headings field, a cap on the words, words added from the first
documents), the fusion weight of the query, or a boost among the first documents
(proximity of the query's words, its words in headings).

Figures on: docs/search.md (ranking: what was tried), through quality_cv.py.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from pocketmcp.core import fusion
from pocketmcp.core.keywords import STOPWORDS
from pocketmcp.core.metrics import hit_at, mrr_at, ndcg_at
from pocketmcp.search.fuse import Params, Stage, fuse, keyword_relevance

DEPTH = 200
# Documents rank by their best chunk for words in an index of at least this many chunks a
# document (whole-document BM25 below it), in the baseline and every candidate: None, the
# previous default (whole-document BM25 always). quality_cv.py --rule-chunks sets it.
RULE_CHUNKS: float | None = None


class Corpus:
    def __init__(self, cache: Any, vectors: np.ndarray, qvecs: np.ndarray,
                 qrels: Mapping[str, Mapping[str, int]]) -> None:
        self.names = {int(k): v for k, v in cache.names.items()}
        self.ids = np.asarray(cache.chunk_ids)
        self.docs = np.asarray(cache.chunk_docs)
        self.vectors = vectors
        self.background = cache.background
        indexed = set(self.names.values())
        self.queries = {q: c for q, c in cache.queries.items()
                        if q in qrels and set(qrels[q]) <= indexed}
        self.qvec = {q: qvecs[i] for i, q in enumerate(cache.queries)}
        self.qrels = {q: qrels[q] for q in self.queries}
        self.texts = {int(k): v for k, v in cache.texts.items()}
        self.heading_lists: dict[str, Any] = {}
        self.chunks_per_doc = len(self.ids) / max(1, len(self.names))
        self.doc_rows: dict[int, np.ndarray] = {}
        order = np.argsort(self.docs, kind="stable")
        bounds = np.flatnonzero(np.diff(self.docs[order])) + 1
        for rows in np.split(order, bounds):
            if len(rows):
                self.doc_rows[int(self.docs[rows[0]])] = rows
        means = np.stack([self.vectors[self.doc_rows[d]].mean(0) for d in self.doc_rows])
        self.doc_ids = np.asarray(list(self.doc_rows))
        self.doc_vectors = means / np.linalg.norm(means, axis=1, keepdims=True)

    @classmethod
    def make(cls, cache: Any, vectors: np.ndarray, qvecs: np.ndarray,
             qrels: Mapping[str, Mapping[str, int]]) -> Corpus:
        return cls(cache, vectors, qvecs, qrels)

    def nearest(self, q: np.ndarray, depth: int = DEPTH) -> dict[int, float]:
        scores = self.vectors @ q
        top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth]
        return {int(self.ids[i]): float(scores[i]) for i in top}

    def stage(self, qid: str, vector: dict[int, float], variant: str | None = None) -> Stage:
        c = self.queries[qid] if variant is None else self.queries[qid]["variants"][variant]
        by_chunk = RULE_CHUNKS is not None and self.chunks_per_doc >= RULE_CHUNKS
        doc_of = {int(k): int(v) for k, v in c["doc_of"].items()}
        doc_of.update({int(self.ids[i]): int(self.docs[i]) for i in
                       (self.row[k] for k in vector)})
        return Stage(vector=vector, keyword={int(k): v for k, v in c["keyword"].items()},
                     doc_of=doc_of,
                     doc_keyword={} if by_chunk else {
                         int(k): v for k, v in c["doc_keyword"].items()},
                     first_chunk={} if by_chunk else {
                         int(k): int(v) for k, v in c["first_chunk"].items()},
                     keyword_ref=c["ref"], vector_background=self.background)

    @property
    def row(self) -> dict[int, int]:
        if not hasattr(self, "_row"):
            self._row = {int(c): i for i, c in enumerate(self.ids)}
        return self._row


def _top_names(corpus: Corpus, stage: Stage, scores: dict[int, float]) -> list[str]:
    out: list[str] = []
    for chunk_id in fusion.ranked(scores):
        name = corpus.names[stage.doc_of[chunk_id]]
        if name not in out:
            out.append(name)
        if len(out) == 10:
            break
    return out


def ranked_docs(corpus: Corpus, stage: Stage, params: Params) -> list[str]:
    scores = fuse(stage, "hybrid", params, True)
    out: list[str] = []
    for chunk_id in fusion.ranked(scores):
        name = corpus.names[stage.doc_of[chunk_id]]
        if name not in out:
            out.append(name)
        if len(out) == 10:
            break
    return out


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS]


def _stems(text: str) -> list[str]:
    """Words cut to their first five letters: a light stemmer for proximity."""
    return [w[:5] for w in _content_words(text)]


def _near(pairs: list[tuple[str, str]], text: str, window: int) -> set[tuple[str, str]]:
    """The query's word pairs found in `text` within `window` words of each other, in order."""
    words = _stems(text)
    at: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        at.setdefault(w, []).append(i)
    found = set()
    for a, b in pairs:
        if a in at and b in at and any(0 < j - i <= window for i in at[a] for j in at[b]):
            found.add((a, b))
    return found


def _mix(first: Mapping[int, float], ref_a: float, second: Mapping[int, float], ref_b: float,
         share: float) -> dict[int, float]:
    """Two keyword lists mixed by their relevances (`second` weighs `share`), as raw scores
    over a reference of 1."""
    out = {}
    for k in set(first) | set(second):
        r = ((1 - share) * keyword_relevance(first.get(k, 0.0), ref_a)
             + share * keyword_relevance(second.get(k, 0.0), ref_b))
        out[k] = r / (1.0 - r)
    return out


def _documents_rule(p: Mapping[str, Any], corpus: Corpus, stage: Stage) -> Stage:
    """With `p["chunks"]`: documents rank by their best chunk for words in an index of at
    least that many chunks per document (whole-document BM25 below it)."""
    if "chunks" in p and corpus.chunks_per_doc >= p["chunks"]:
        return msgspec.structs.replace(stage, doc_keyword={}, first_chunk={})
    return stage


def _rank(name: str, p: Mapping[str, Any], corpus: Corpus, qid: str) -> list[str]:
    q = corpus.qvec[qid]
    fields = {k: v for k, v in p.items() if k in Params.__struct_fields__}
    params = Params(**fields)
    vector = corpus.nearest(q)
    if name in ("baseline", "weight"):
        return ranked_docs(corpus, corpus.stage(qid, vector), params)
    if name == "title":
        variant = None if p["tw"] == 1.0 else f"tw{p['tw']}"
        return ranked_docs(corpus, _documents_rule(p, corpus, corpus.stage(qid, vector,
                                                                             variant)), params)
    if name == "headings":
        # Whole-document BM25 with the document's headings as a field weighing `hw`.
        stage = corpus.stage(qid, vector)
        if p["hw"] != 1.0 and stage.doc_keyword:
            docs = {int(k): v for k, v in corpus.heading_lists[qid][str(p["hw"])].items()}
            first = {**{d: int(corpus.ids[corpus.doc_rows[d][0]]) for d in docs
                        if d in corpus.doc_rows}, **stage.first_chunk}
            stage = msgspec.structs.replace(stage, doc_keyword=docs, first_chunk=first)
        return ranked_docs(corpus, stage, params)
    if name == "most":
        variant = None if p["most"] == 12 else f"most{p['most']}"
        return ranked_docs(corpus, corpus.stage(qid, vector, variant), params)
    if name == "rm3":
        # Keyword expansion: the words that best stand for the default's first 3 documents,
        # searched on their own; their lists mixed into the query's with weight `lam`.
        stage = corpus.stage(qid, vector)
        more = corpus.queries[qid]["variants"][f"rm{p['k']}"]
        extra = {int(k): v for k, v in more["keyword"].items()}
        extra_docs = {int(k): v for k, v in more["doc_keyword"].items()}
        doc_of = {**stage.doc_of, **{int(k): int(v) for k, v in more["doc_of"].items()}}
        first = {**{int(k): int(v) for k, v in more["first_chunk"].items()},
                 **stage.first_chunk}
        lam = p["lam"]
        stage = Stage(vector=stage.vector,
                      keyword=_mix(stage.keyword, stage.keyword_ref, extra, more["ref"], lam),
                      doc_of=doc_of,
                      doc_keyword=_mix(stage.doc_keyword, stage.keyword_ref, extra_docs,
                                       more["ref"], lam) if stage.doc_keyword else {},
                      first_chunk=first if stage.doc_keyword else {}, keyword_ref=1.0,
                      vector_background=stage.vector_background)
        return ranked_docs(corpus, stage, params)
    if name == "headmatch":
        # A question's words in a document's title or headings: a document among the first
        # `top` gains `beta` times the share of the query's words found in its section paths.
        stage = _documents_rule(p, corpus, corpus.stage(qid, vector))
        scores = fuse(stage, "hybrid", params, True)
        words = set(_stems(corpus.queries[qid]["text"]))
        if words:
            for chunk_id in fusion.ranked(scores)[:p["top"]]:
                doc = stage.doc_of[chunk_id]
                heads: set[str] = set()
                for row in corpus.doc_rows.get(doc, ()):
                    text = corpus.texts.get(int(corpus.ids[row]), "")
                    heads.update(_stems(text.split("\n", 1)[0]))
                scores[chunk_id] += p["beta"] * len(words & heads) / len(words)
        return _top_names(corpus, stage, scores)
    if name == "phrase":
        # Proximity: a document among the first `top` whose chunks hold pairs of the query's
        # consecutive words within `window` words gains `beta` times the share of pairs held.
        stage = corpus.stage(qid, vector)
        scores = fuse(stage, "hybrid", params, True)
        words = _stems(corpus.queries[qid]["text"])
        pairs = list(dict.fromkeys(itertools.pairwise(words)))
        if pairs:
            for chunk_id in fusion.ranked(scores)[:p["top"]]:
                doc = stage.doc_of[chunk_id]
                found: set[tuple[str, str]] = set()
                for row in corpus.doc_rows.get(doc, ()):
                    found |= _near(pairs, corpus.texts.get(int(corpus.ids[row]), ""),
                                   p["window"])
                scores[chunk_id] += p["beta"] * len(found) / len(pairs)
        out: list[str] = []
        for chunk_id in fusion.ranked(scores):
            doc_name = corpus.names[stage.doc_of[chunk_id]]
            if doc_name not in out:
                out.append(doc_name)
            if len(out) == 10:
                break
        return out
    if name == "chunkwords":
        # Documents rank by their best chunk for words too, not by whole-document BM25.
        stage = msgspec.structs.replace(corpus.stage(qid, vector), doc_keyword={},
                                        first_chunk={})
        return ranked_docs(corpus, stage, params)
    if name == "wordsblend":
        # A document's keyword score: its whole-document BM25 blended with its best chunk's.
        stage = corpus.stage(qid, vector)
        best: dict[int, float] = {}
        for chunk, score in stage.keyword.items():
            doc = stage.doc_of[chunk]
            best[doc] = max(best.get(doc, 0.0), score)
        a = p["a"]
        blended = {d: a * stage.doc_keyword.get(d, 0.0) + (1 - a) * best.get(d, 0.0)
                   for d in set(best) | set(stage.doc_keyword)}
        stage = msgspec.structs.replace(stage, doc_keyword=blended)
        return ranked_docs(corpus, stage, params)
    if name in ("chunkcount", "chunksecond"):
        # A document's keyword score from its chunks' BM25: its best chunk's, plus (count)
        # the query's reference times a saturating count of its other matching chunks,
        # m / (m + 1), or (second) its second best chunk's; g weighs the addition.
        stage = corpus.stage(qid, vector)
        per_doc: dict[int, list[float]] = {}
        for chunk, score in stage.keyword.items():
            per_doc.setdefault(stage.doc_of[chunk], []).append(score)
        g = p["g"]
        rolled = {}
        for doc, scores in per_doc.items():
            scores.sort(reverse=True)
            others = len(scores) - 1
            extra = (stage.keyword_ref * others / (others + 1) if name == "chunkcount"
                     else (scores[1] if others else 0.0))
            rolled[doc] = scores[0] + g * extra
        stage = msgspec.structs.replace(stage, doc_keyword=rolled, first_chunk={})
        return ranked_docs(corpus, stage, params)
    if name == "rocchio":
        first = ranked_docs(corpus, corpus.stage(qid, vector), Params())
        by_name = {v: k for k, v in corpus.names.items()}
        rows = []
        for doc_name in first[:p["k"]]:
            doc = by_name[doc_name]
            doc_rows = corpus.doc_rows[doc]
            best = doc_rows[np.argmax(corpus.vectors[doc_rows] @ q)]
            rows.append(best)
        centroid = corpus.vectors[rows].mean(0)
        moved = q + p["beta"] * centroid
        moved /= np.linalg.norm(moved)
        return ranked_docs(corpus, corpus.stage(qid, corpus.nearest(moved)), params)
    if name in ("longmean", "longmean_03", "longmean_all"):
        # The rule kept (search/shape.py): from `chunks` chunks a document, documents rank
        # by their best chunk for words, and by their best chunk's cosine blended with the
        # mean cosine of all their chunks (weight `g`).
        stage = _documents_rule(p, corpus, corpus.stage(qid, vector))
        if corpus.chunks_per_doc < p["chunks"]:
            return ranked_docs(corpus, stage, params)
        top: dict[int, tuple[int, float]] = {}
        for chunk, score in vector.items():
            doc = stage.doc_of[chunk]
            if score > top.get(doc, (0, -2.0))[1]:
                top[doc] = (chunk, score)
        mixed = {chunk: (1 - p["g"]) * score
                 + p["g"] * float((corpus.vectors[corpus.doc_rows[doc]] @ q).mean())
                 for doc, (chunk, score) in top.items()}
        return ranked_docs(corpus, msgspec.structs.replace(stage, vector=mixed), params)
    if name in ("rollup", "docvec", "docvec_byindex"):
        # A document's vector score: its best chunk's, blended with its second best chunk
        # (rollup) or with its mean vector (docvec); handed to the fusion as its best chunk.
        # docvec_byindex: with the documents rule (best chunk for words from `chunks` chunks
        # a document).
        stage = _documents_rule(p, corpus, corpus.stage(qid, vector)) if (
            name == "docvec_byindex") else corpus.stage(qid, vector)
        best: dict[int, tuple[int, float]] = {}
        for chunk, score in vector.items():
            doc = stage.doc_of[chunk]
            if score > best.get(doc, (0, -2.0))[1]:
                best[doc] = (chunk, score)
        blended = {}
        g = p["g"]
        for doc, (chunk, score) in best.items():
            rows = corpus.doc_rows[doc]
            if name == "rollup":
                others = np.sort(corpus.vectors[rows] @ q)[::-1]
                second = float(others[1]) if len(others) > 1 else score
                blended[chunk] = (1 - g) * score + g * second
            else:
                docvec = corpus.vectors[rows].mean(0)
                docvec /= np.linalg.norm(docvec)
                blended[chunk] = (1 - g) * score + g * float(docvec @ q)
        stage = msgspec.structs.replace(stage, vector=blended)
        return ranked_docs(corpus, stage, params)
    if name in ("length", "agreement"):
        stage = corpus.stage(qid, vector)
        if name == "length":
            short = len(_content_words(corpus.queries[qid]["text"])) <= p["n"]
            w = p["short"] if short else p["long"]
        else:
            top_v = {stage.doc_of[c] for c in fusion.ranked(vector)[:20]}
            words = stage.doc_keyword or {}
            top_k = set(fusion.ranked(words)[:10])
            top_v = list(dict.fromkeys(stage.doc_of[c] for c in fusion.ranked(vector)))[:10]
            agree = len(top_k & set(top_v)) / 10
            w = p["low"] if agree < p["t"] else p["high"]
        return ranked_docs(corpus, stage, Params(vector_weight=w))
    raise ValueError(name)


def run(name: str, p: Mapping[str, Any], corpus: Corpus) -> dict[str, tuple[float, float,
                                                                            float]]:
    """(nDCG@10, MRR@10, hit@1) per query."""
    out = {}
    for qid in corpus.queries:
        ranked = _rank(name, p, corpus, qid)
        rel = corpus.qrels[qid]
        out[qid] = (ndcg_at(ranked, rel), mrr_at(ranked, rel), hit_at(ranked, rel, 1))
    return out


GRIDS: dict[str, list[dict[str, Any]]] = {
    "title": [{"tw": t} for t in (0.5, 1.0, 2.0, 4.0)],
    "headings": [{"hw": w} for w in (1.0, 2.0, 4.0, 8.0)],
    "most": [{"most": m} for m in (6, 8, 12, 20)],
    "rm3": [{"k": k, "lam": lam} for k, lam in itertools.product((5, 10), (0.1, 0.2, 0.3))],
    "headmatch": [{"top": 30, "beta": b} for b in (0.02, 0.05, 0.1, 0.2)],
    "phrase": [{"top": 30, "window": w, "beta": b}
               for w, b in itertools.product((1, 4, 8), (0.02, 0.05, 0.1))],
    "weight": [{"vector_weight": w} for w in (0.3, 0.4, 0.5, 0.6, 0.7)],
    "chunkwords": [{"vector_weight": w} for w in (0.4, 0.5, 0.6)],
    "wordsblend": [{"a": a} for a in (0.0, 0.25, 0.5, 0.75, 1.0)],
    "chunkcount": [{"g": g} for g in (0.1, 0.25, 0.5)],
    "chunksecond": [{"g": g} for g in (0.1, 0.25, 0.5)],
    "rocchio": [{"k": k, "beta": b} for k, b in itertools.product((1, 3, 5), (0.2, 0.4, 0.7))],
    "rollup": [{"g": g} for g in (0.1, 0.2, 0.3)],
    "docvec": [{"g": g} for g in (0.1, 0.2, 0.35, 0.5)],
    "docvec_byindex": [{"g": g, "chunks": c} for g, c in itertools.product(
        (0.2, 0.35, 0.5, 0.65), (6, 10_000))],
    "longmean": [{"g": g, "chunks": 6} for g in (0.2, 0.3, 0.35, 0.5)],
    "longmean_03": [{"g": 0.3, "chunks": 6}],  # the weight kept, fixed
    "longmean_all": [{"g": g, "chunks": 0} for g in (0.1, 0.2, 0.3, 0.5)],  # on any index
    "length": [{"n": n, "short": s, "long": lw}
               for n, s, lw in itertools.product((3, 5), (0.3, 0.4, 0.5, 0.6),
                                                 (0.4, 0.5, 0.6))],
    "agreement": [{"t": t, "low": lo, "high": hi}
                  for t, lo, hi in itertools.product((0.2, 0.4), (0.4, 0.5, 0.6, 0.7),
                                                     (0.3, 0.4, 0.5))],
}
