"""Whole documents ranked by their words on Postgres, as SQLite ranks them for one match per
document (its documents_fts table): BM25 over the whole document, FTS5's formula and
constants, the idf over documents. A word's frequency in a document is its occurrences in
the title (weighted as a chunk's title is) plus those in the text of each of its chunks; the
document's length is the sum of its chunks' tokens, against the average document's.

In an index of long pages documents rank by their best chunk for words instead
(search/shape.py): `best_chunk_stage` scores each chunk as FTS5 scores SQLite's chunks (the
section path, or the title without one, weighed against the text; the chunk's length
against the average chunk's; the idf over chunks) and keeps each document's best.

The index's totals (documents, tokens of every chunk) take a pass over the chunks: they are
kept for STATS_SECONDS per index, and change little from one write to the next."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pocketmcp.store.pg import schema

Rows = Callable[[str, Sequence[Any] | Mapping[str, Any]], list[Any]]

K1, B = 1.2, 0.75  # BM25's constants, FTS5's (store/sqlite/keywords/bm25.py)
POSTINGS = 20_000  # matching chunks read for one query, at most
STATS_SECONDS = 30.0  # how long an index's totals are kept

_stats_lock = threading.Lock()
_stats: dict[str, tuple[float, int, int]] = {}  # index -> (read at, documents, tokens)


def _totals(rows: Rows, key: str) -> tuple[int, int]:
    """(documents, tokens of every chunk) of the index, read at most every STATS_SECONDS
    (every time without a `key`)."""
    now = time.monotonic()
    with _stats_lock:
        kept = _stats.get(key) if key else None
    if kept is not None and now - kept[0] < STATS_SECONDS:
        return kept[1], kept[2]
    (docs, tokens), = rows("SELECT (SELECT count(*) FROM documents), "
                           "(SELECT coalesce(sum(tokens), 0) FROM chunks)", ())
    if key:
        with _stats_lock:
            if len(_stats) > 1000:
                _stats.clear()
            _stats[key] = (now, int(docs), int(tokens))
    return int(docs), int(tokens)


def chunks_holding(rows: Rows, counted: Sequence[tuple[int, str]], cap: int) -> list[int]:
    """How many chunks hold each lexeme: its count as given, or counted whole when the
    count stopped at `cap` + 1."""
    over = [w for n, w in counted if n > cap]
    whole = dict(rows(
        "SELECT w, (SELECT count(*) FROM chunks c WHERE c.tsv @@ quote_literal(w)::tsquery) "
        "FROM unnest(%s::text[]) w", (over,))) if over else {}
    return [int(whole.get(w, n)) for n, w in counted]


def document_stage(rows: Rows, words: Sequence[str], depth: int,
                   allowed: Sequence[int] | None, negated: str, title_weight: float, *,
                   key: str = "") -> tuple[dict[int, float], dict[int, int]]:
    """The best `depth` documents holding any of `words` (lexemes), best first: (doc id ->
    BM25, doc id -> its first chunk). One pass over the chunks holding a word gives each
    document's frequencies and how many documents hold each word; `allowed` and the
    `negated` words narrow the documents ranked, not the statistics."""
    if not words:
        return {}, {}
    docs, tokens = _totals(rows, key)
    if not docs or not tokens:
        return {}, {}
    found = rows(
        "WITH m AS (SELECT c.doc_id, c.tsv FROM chunks c WHERE c.tsv @@ %(any)s::tsquery "
        "LIMIT %(limit)s), "
        "o AS (SELECT m.doc_id, u.lexeme AS w, "
        "max(cardinality(array_positions(u.weights, 'A'))) AS title, "
        "sum(cardinality(array_positions(u.weights, 'C')) + "
        "cardinality(array_positions(u.weights, 'D'))) AS text "
        "FROM m, unnest(m.tsv) u WHERE u.lexeme = ANY(%(words)s) GROUP BY m.doc_id, u.lexeme), "
        "l AS (SELECT c.doc_id, sum(c.tokens) AS len, "
        "min(c.chunk_id) FILTER (WHERE c.idx = 0) AS first FROM chunks c "
        "WHERE c.doc_id IN (SELECT doc_id FROM o) GROUP BY c.doc_id) "
        "SELECT o.doc_id, o.w, o.title, o.text, l.len, l.first FROM o JOIN l USING (doc_id)",
        {"any": " | ".join(_literal(w) for w in words), "words": list(words),
         "limit": POSTINGS})
    held: dict[str, int] = {}
    for _, word, *_rest in found:
        held[word] = held.get(word, 0) + 1
    ranked = {int(r[0]) for r in found}
    if allowed is not None:
        ranked &= set(allowed)
    if negated and ranked:
        ranked -= {int(r[0]) for r in rows(
            "SELECT DISTINCT c.doc_id FROM chunks c WHERE c.doc_id = ANY(%s) AND c.tsv @@ "
            f"websearch_to_tsquery('{schema.TEXT_CONFIG}', %s)", (sorted(ranked), negated))}
    average = float(tokens) / float(docs)
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


def best_chunk_stage(rows: Rows, words: Sequence[str], depth: int,
                     allowed: Sequence[int] | None, negated: str, title_weight: float, *,
                     key: str = "") -> tuple[dict[int, float], dict[int, int]]:
    """The best `depth` documents by their best chunk's BM25 (FTS5's), best first: (doc id ->
    that score, doc id -> that chunk). `allowed` and the `negated` words narrow the chunks
    ranked, not the statistics."""
    if not words:
        return {}, {}
    chunks, tokens = _chunk_totals(rows, key)
    if not chunks or not tokens:
        return {}, {}
    found = rows(
        "WITH m AS (SELECT c.chunk_id, c.doc_id, c.tokens, c.section <> '' AS sec, c.tsv "
        "FROM chunks c WHERE c.tsv @@ %(any)s::tsquery LIMIT %(limit)s) "
        "SELECT m.chunk_id, m.doc_id, m.tokens, u.lexeme, "
        "CASE WHEN m.sec THEN cardinality(array_positions(u.weights, 'B')) "
        "ELSE cardinality(array_positions(u.weights, 'A')) END, "
        "cardinality(array_positions(u.weights, 'C')) + "
        "cardinality(array_positions(u.weights, 'D')) "
        "FROM m, unnest(m.tsv) u WHERE u.lexeme = ANY(%(words)s)",
        {"any": " | ".join(_literal(w) for w in words), "words": list(words),
         "limit": POSTINGS})
    held: dict[str, int] = {}
    for row in found:
        held[row[3]] = held.get(row[3], 0) + 1
    ranked = {int(r[0]) for r in found}
    if allowed is not None:
        keep = set(allowed)
        ranked = {int(r[0]) for r in found if int(r[1]) in keep}
    if negated and ranked:
        ranked -= {int(r[0]) for r in rows(
            "SELECT c.chunk_id FROM chunks c WHERE c.chunk_id = ANY(%s) AND c.tsv @@ "
            f"websearch_to_tsquery('{schema.TEXT_CONFIG}', %s)", (sorted(ranked), negated))}
    average = float(tokens) / float(chunks)
    scores: dict[int, float] = {}
    doc_of: dict[int, int] = {}
    for chunk_id, doc_id, length, word, title, text in found:
        chunk = int(chunk_id)
        if chunk not in ranked:
            continue
        n = held[word]
        weight = math.log((chunks - n + 0.5) / (n + 0.5))
        freq = title_weight * float(title or 0) + float(text or 0)
        norm = K1 * ((1 - B) + B * float(length or 0) / average)
        scores[chunk] = scores.get(chunk, 0.0) + (weight if weight > 0.0 else 1e-6) * (
            freq * (K1 + 1.0)) / (freq + norm)
        doc_of[chunk] = int(doc_id)
    best: dict[int, tuple[float, int]] = {}
    for chunk in sorted(scores, key=lambda c: (-scores[c], c)):
        best.setdefault(doc_of[chunk], (scores[chunk], chunk))
    order = sorted(best, key=lambda d: (-best[d][0], d))[:depth]
    return {d: best[d][0] for d in order}, {d: best[d][1] for d in order}


def _chunk_totals(rows: Rows, key: str) -> tuple[int, int]:
    """(chunks, their tokens) of the index, kept as `_totals`'s are."""
    now = time.monotonic()
    name = f"{key}#chunks" if key else ""
    with _stats_lock:
        kept = _stats.get(name) if name else None
    if kept is not None and now - kept[0] < STATS_SECONDS:
        return kept[1], kept[2]
    (count, tokens), = rows("SELECT count(*), coalesce(sum(tokens), 0) FROM chunks", ())
    if name:
        with _stats_lock:
            if len(_stats) > 1000:
                _stats.clear()
            _stats[name] = (now, int(count), int(tokens))
    return int(count), int(tokens)


def _literal(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"
