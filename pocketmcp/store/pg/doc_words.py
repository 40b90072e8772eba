"""Chunks and whole documents ranked by their words on Postgres, as SQLite's FTS5 ranks them:
its BM25 formula and constants over the same terms (tokens.py).

A chunk is scored as FTS5 scores SQLite's chunks_fts: the words in its title column (the
section path, or the document's title without one) weighed against those in its text, its
length in terms against the average chunk's, the idf over chunks (`chunk_scores`).

For one match per document SQLite ranks whole documents (its documents_fts table): here a
word's frequency in a document is its occurrences in the title (weighted as a chunk's title
is) plus those in the text of each of its chunks; the document's length is the sum of its
chunks' terms, against the average document's, and the idf is over documents
(`document_stage`). Chunks that overlap count their shared text twice, which SQLite's does
not.

The index's totals (documents, chunks, terms of every chunk) take a pass over the chunks:
they are kept for STATS_SECONDS per index, and change little from one write to the next."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pocketmcp.store.pg import tokens

Rows = Callable[[str, Sequence[Any] | Mapping[str, Any]], list[Any]]

K1, B = 1.2, 0.75  # BM25's constants, FTS5's (store/sqlite/keywords/bm25.py)
POSTINGS = 20_000  # matching chunks read for one query, at most
STATS_SECONDS = 30.0  # how long an index's totals are kept
TITLE_SHARE = 1024  # a title column's occurrence in ts_rank_cd's count: 1/TITLE_SHARE

_stats_lock = threading.Lock()
# index -> (read at, documents, chunks, terms of every chunk, terms of every document)
_stats: dict[str, tuple[float, int, int, int, int]] = {}


def _totals(rows: Rows, key: str) -> tuple[int, int, int, int]:
    """(documents, chunks, terms of every chunk, terms of every document: its chunks' text
    and its title where its first chunk has no section path) of the index, read at most
    every STATS_SECONDS (every time without a `key`)."""
    now = time.monotonic()
    with _stats_lock:
        kept = _stats.get(key) if key else None
    if kept is not None and now - kept[0] < STATS_SECONDS:
        return kept[1], kept[2], kept[3], kept[4]
    (docs, chunks, terms, texts, titles), = rows(
        "SELECT (SELECT count(*) FROM documents), count(*), "
        "coalesce(sum(title_terms + text_terms), 0), coalesce(sum(text_terms), 0), "
        "coalesce(sum(title_terms) FILTER (WHERE idx = 0 AND section = ''), 0) FROM chunks", ())
    found = (int(docs), int(chunks), int(terms), int(texts) + int(titles))
    if key:
        with _stats_lock:
            if len(_stats) > 1000:
                _stats.clear()
            _stats[key] = (now, *found)
    return found


def chunk_totals(rows: Rows, key: str) -> tuple[int, int]:
    """(chunks, their terms) of the index, kept as `_totals` says."""
    _, chunks, terms, _ = _totals(rows, key)
    return chunks, terms


def chunks_holding(rows: Rows, counted: Sequence[tuple[int, str]], cap: int) -> list[int]:
    """How many chunks match each tsquery: its count as given, or counted whole when the
    count stopped at `cap` + 1."""
    over = [q for n, q in counted if n > cap]
    whole = dict(rows(
        "SELECT q, (SELECT count(*) FROM chunks c WHERE c.tsv @@ q::tsquery) "
        "FROM unnest(%s::text[]) q", (over,))) if over else {}
    return [int(whole.get(q, n)) for n, q in counted]


def _any(words: Sequence[str], weights: str = "") -> str:
    return " | ".join(tokens.query_of([w], weights) for w in words)


def chunk_scores(rows: Rows, phrases: Sequence[Sequence[str]], allowed: Sequence[int] | None,
                 negated: str, title_weight: float, *, key: str = ""
                 ) -> tuple[dict[int, float], dict[int, int]]:
    """FTS5's BM25 of every chunk holding any of `phrases` (a word's terms, in a row) in
    SQLite's columns (at most POSTINGS of them): (chunk id -> score, chunk id -> doc id).
    `allowed` and the `negated` tsquery narrow the chunks scored, not the statistics."""
    chunks, terms = chunk_totals(rows, key)
    if not phrases or not chunks or not terms:
        return {}, {}
    # Each phrase's occurrences in a chunk's SQLite columns, counted by ts_rank_cd over the
    # phrase restricted to them: each occurrence is one cover, worth its column's weight,
    # 1 in the text and 1/TITLE_SHARE in the title column. A tsvector keeps at most 256
    # positions of a term, so both counts read back exactly. One index lookup a phrase.
    found = rows(
        "SELECT c.chunk_id, c.doc_id, c.title_terms + c.text_terms, t.i, "
        "ts_rank_cd(%(weights)s::float4[], c.tsv, t.q::tsquery, 0) "
        "FROM unnest(%(any)s::text[]) WITH ORDINALITY AS t(q, i), LATERAL (SELECT c.chunk_id, "
        "c.doc_id, c.title_terms, c.text_terms, c.tsv FROM chunks c WHERE c.tsv @@ "
        "t.q::tsquery LIMIT %(limit)s) c",
        {"any": [tokens.query_of(p, tokens.CHUNK_WEIGHTS) for p in phrases],
         "weights": [1.0, 1.0, 1.0 / TITLE_SHARE, 1.0 / TITLE_SHARE], "limit": POSTINGS})
    counts: list[dict[int, tuple[int, int]]] = [{} for _ in phrases]
    doc_of: dict[int, int] = {}
    length: dict[int, int] = {}
    for chunk_id, doc_id, size, i, rank in found:
        chunk = int(chunk_id)
        doc_of[chunk] = int(doc_id)
        length[chunk] = int(size or 0)
        text = int(rank + 0.5 / TITLE_SHARE)
        title = round((rank - text) * TITLE_SHARE)
        if title or text:
            counts[int(i) - 1][chunk] = (title, text)
    ranked = {c for per_chunk in counts for c in per_chunk}
    if allowed is not None:
        keep = set(allowed)
        ranked = {c for c in ranked if doc_of[c] in keep}
    if negated and ranked:
        ranked -= {int(r[0]) for r in rows(
            "SELECT c.chunk_id FROM chunks c WHERE c.chunk_id = ANY(%s) AND c.tsv @@ "
            "%s::tsquery", (sorted(ranked), negated))}
    average = float(terms) / float(chunks)
    scores: dict[int, float] = {}
    for per_chunk in counts:
        n = len(per_chunk)
        weight = math.log((chunks - n + 0.5) / (n + 0.5))
        for chunk, (title, text) in per_chunk.items():
            if chunk not in ranked:
                continue
            freq = title_weight * float(title) + float(text)
            norm = K1 * ((1 - B) + B * float(length[chunk]) / average)
            scores[chunk] = scores.get(chunk, 0.0) + (weight if weight > 0.0 else 1e-6) * (
                freq * (K1 + 1.0)) / (freq + norm)
    return scores, {c: doc_of[c] for c in scores}


def document_stage(rows: Rows, words: Sequence[str], depth: int,
                   allowed: Sequence[int] | None, negated: str, title_weight: float, *,
                   key: str = "") -> tuple[dict[int, float], dict[int, int]]:
    """The best `depth` documents holding any of `words` (terms), best first: (doc id ->
    BM25, doc id -> its first chunk). One pass over the chunks holding a word gives each
    document's frequencies and how many documents hold each word; `allowed` and the
    `negated` tsquery narrow the documents ranked, not the statistics."""
    if not words:
        return {}, {}
    docs, _, _, terms = _totals(rows, key)
    if not docs or not terms:
        return {}, {}
    found = rows(
        "WITH m AS (SELECT c.doc_id, c.tsv FROM chunks c WHERE c.tsv @@ %(any)s::tsquery "
        "LIMIT %(limit)s), "
        "o AS (SELECT m.doc_id, u.lexeme AS w, "
        "max(cardinality(array_positions(u.weights, 'A')) + "
        "cardinality(array_positions(u.weights, 'D'))) AS title, "
        "sum(cardinality(array_positions(u.weights, 'C'))) AS text "
        "FROM m, unnest(m.tsv) u WHERE u.lexeme = ANY(%(words)s) GROUP BY m.doc_id, u.lexeme), "
        "l AS (SELECT c.doc_id, sum(c.text_terms) + coalesce(max(c.title_terms) FILTER ("
        "WHERE c.idx = 0 AND c.section = ''), 0) AS len, "
        "min(c.chunk_id) FILTER (WHERE c.idx = 0) AS first FROM chunks c "
        "WHERE c.doc_id IN (SELECT doc_id FROM o) GROUP BY c.doc_id) "
        "SELECT o.doc_id, o.w, o.title, o.text, l.len, l.first FROM o JOIN l USING (doc_id)",
        {"any": _any(words), "words": list(words), "limit": POSTINGS})
    held: dict[str, int] = {}
    for _, word, *_rest in found:
        held[word] = held.get(word, 0) + 1
    ranked = {int(r[0]) for r in found}
    if allowed is not None:
        ranked &= set(allowed)
    if negated and ranked:
        ranked -= {int(r[0]) for r in rows(
            "SELECT DISTINCT c.doc_id FROM chunks c WHERE c.doc_id = ANY(%s) AND c.tsv @@ "
            "%s::tsquery", (sorted(ranked), negated))}
    average = float(terms) / float(docs)
    scores: dict[int, float] = {}
    first: dict[int, int] = {}
    for doc_id, word, title, text, length, head in found:
        doc = int(doc_id)
        if doc not in ranked:
            continue
        n = held[word]
        weight = math.log((docs - n + 0.5) / (n + 0.5))
        freq = title_weight * float(title or 0) + float(text or 0)
        norm = K1 * ((1 - B) + B * float(length or 0) / average)
        scores[doc] = scores.get(doc, 0.0) + (weight if weight > 0.0 else 1e-6) * (
            freq * (K1 + 1.0)) / (freq + norm)
        if head is not None:
            first[doc] = int(head)
    best = sorted(scores, key=lambda d: (-scores[d], d))[:depth]
    return {d: scores[d] for d in best}, {d: first[d] for d in best if d in first}
