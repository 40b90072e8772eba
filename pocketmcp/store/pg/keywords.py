"""The keyword retriever on Postgres: full-text search over the chunks' weighted tsvector,
ranked in the manner of BM25, as SQLite's FTS5 ranks (store/sqlite/keywords/textsearch.py).

A query's words are looked up one by one (how many chunks hold each, counted up to a cap),
and the rarer ones are searched for together, any of them: at most MAX_WORDS, none held by
more than COMMON_WORD chunks (the rarest word always), and no more than CANDIDATES
matching chunks in all, so every matching chunk is ranked and the cost stays bounded
however common the query's words are. A chunk's score sums, over the words it holds, the
word's idf times its ts_rank_cd in the chunk (title, section path and text weighted;
normalised as rank / (rank + 1), which saturates as BM25's term frequency does). A chunk
holding every word of the query as websearch_to_tsquery reads it (quotes, `or`) has its
score multiplied by ALL_WORDS_BOOST. Words written as `-word` (or `-"a phrase"`) exclude
the chunks that hold them.

With one match per document (`documents`), documents rank as SQLite's do: by BM25 over the
whole document (FTS5's formula and constants, its idf over documents), its words counted
over its chunks (the title once, weighted as a chunk's), its length in tokens against the
average document's. Ranking a document by its best chunk instead won on long pages and lost
on short abstracts (docs/search.md, Postgres); both stores keep one rule."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pocketmcp.core.keywords import reference_bm25
from pocketmcp.store.pg import schema
from pocketmcp.store.rows import Keywords

Rows = Callable[[str, Sequence[Any] | Mapping[str, Any]], list[Any]]

# ts_rank_cd's weights of D, C (text), B (section path), A (title); at most 1 each.
_TEXT_WEIGHT = 0.5
COMMON_WORD = 2000  # chunks holding a word beyond which it is too common to search alone
CANDIDATES = 5000  # matching chunks ranked for one query, at most
MAX_WORDS = 12  # rarest words searched, as SQLite's keyword search keeps
K1, B = 1.2, 0.75  # BM25's constants, FTS5's (store/sqlite/keywords/bm25.py)
DOCUMENT_POSTINGS = 20_000  # matching chunks read for whole-document scores, at most
ALL_WORDS_BOOST = 1.0  # score factor of a chunk holding every word (bench/pg_keywords.py)
NORMALISATION = 32  # ts_rank_cd's: rank / (rank + 1)
_NEGATED = re.compile(r'(?:^|(?<=\s))-("[^"]*"?|[^\s"]+)')


def _weights(title_weight: float) -> str:
    title = min(1.0, _TEXT_WEIGHT * title_weight)
    return "{" + f"0.1,{_TEXT_WEIGHT},{title},{title}" + "}"


def _literal(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def split_negated(query: str) -> tuple[str, str]:
    """(the query without its `-word` and `-"phrase"` parts, those parts joined by `or`, as
    websearch_to_tsquery reads a query)."""
    negated = [m.group(1) for m in _NEGATED.finditer(query)]
    return _NEGATED.sub(" ", query), " or ".join(negated)


def idf(count: int, total: int) -> float:
    """BM25's idf in the form that stays above 0 (Lucene's): a word in half the chunks of
    a small index still counts."""
    total = max(total, count)
    return math.log(1 + (total - count + 0.5) / (count + 0.5))


def keyword_stage(rows: Rows, query: str, depth: int, allowed: Sequence[int] | None, *,
                  title_weight: float, documents: bool = False) -> Keywords:
    """Best chunks for the query's words (the module's docstring says how they are chosen
    and ranked), and with `documents`, best whole documents by BM25 (`document_stage`).
    The 0..1 scale's midpoint (`reference`) is the score of a text holding each searched
    word once, ten words apart, as SQLite's is the BM25 of a text of average length holding
    each word once; with `documents`, that BM25 itself (`reference_bm25`, as SQLite's), the
    scale of the documents' scores."""
    found = Keywords()
    if allowed is not None and not allowed:
        return found
    cfg = schema.TEXT_CONFIG
    positive, negated = split_negated(query)
    counted = rows(  # each lexeme's chunks, counted up to COMMON_WORD + 1
        "SELECT w, (SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE c.tsv @@ "
        "quote_literal(w)::tsquery LIMIT %s) s) FROM unnest(tsvector_to_array("
        f"to_tsvector('{cfg}', %s))) w", (COMMON_WORD + 1, positive))
    present = sorted((int(n), str(w)) for w, n in counted if n)
    if not present:
        return found
    kept = present[:1]
    spent = present[0][0]
    for n, w in present[1:MAX_WORDS]:
        if n > COMMON_WORD or spent + n > CANDIDATES:
            break
        kept.append((n, w))
        spent += n
    total = _chunk_count(rows)
    weights = _weights(title_weight)
    score = " + ".join(f"{idf(n, total)!r} * ts_rank_cd(%(w)s::float4[], {{tsv}}, "
                       f"quote_literal(%(l{i})s)::tsquery, {NORMALISATION})"
                       for i, (n, _) in enumerate(kept))
    boost = (f"CASE WHEN {{tsv}} @@ q.a THEN {ALL_WORDS_BOOST!r} ELSE 1 END"
             if ALL_WORDS_BOOST != 1.0 else "1")
    where = "" if allowed is None else " AND c.doc_id = ANY(%(allowed)s)"
    if negated:
        where += f" AND NOT c.tsv @@ websearch_to_tsquery('{cfg}', %(negated)s)"
    args = {"w": weights, "query": query, "negated": negated, "depth": depth,
            "limit": CANDIDATES, "any": " | ".join(_literal(w) for _, w in kept),
            "allowed": None if allowed is None else list(allowed),
            **{f"l{i}": w for i, (_, w) in enumerate(kept)}}
    found_rows = rows(
        f"WITH q AS (SELECT %(any)s::tsquery AS q, websearch_to_tsquery('{cfg}', %(query)s) "
        "AS a), m AS (SELECT c.chunk_id, c.doc_id, c.tsv FROM chunks c, q "
        f"WHERE c.tsv @@ q.q{where} LIMIT %(limit)s) "
        f"SELECT m.chunk_id, ({score.replace('{tsv}', 'm.tsv')}) * "
        f"{boost.replace('{tsv}', 'm.tsv')} AS r, m.doc_id FROM m, q "
        "ORDER BY r DESC, m.chunk_id LIMIT %(depth)s", args)
    if not found_rows:
        return found
    spread = ("(SELECT string_agg(quote_literal(w) || ':' || (n * 10) || 'C', ' ') FROM "
              "unnest(%(words)s::text[]) WITH ORDINALITY AS t(w, n))::tsvector")
    ref = rows(f"WITH q AS (SELECT websearch_to_tsquery('{cfg}', %(query)s) AS a) "
               f"SELECT ({score.replace('{tsv}', spread)}) * "
               f"{boost.replace('{tsv}', spread)} FROM q",
               {**args, "words": [w for _, w in kept]})[0]
    found.reference = max(float(ref[0] or 0.0), 1e-6)
    for chunk_id, rank, doc_id in found_rows:
        found.keyword[int(chunk_id)] = float(rank)
        found.doc_of[int(chunk_id)] = int(doc_id)
    if documents:
        words = [w for _, w in kept]
        found.doc_keyword, found.first_chunk = document_stage(
            rows, words, depth, allowed, negated, title_weight)
        found.reference = reference_bm25(_chunks_holding(rows, words), total)
    return found


def document_stage(rows: Rows, words: Sequence[str], depth: int,
                   allowed: Sequence[int] | None, negated: str, title_weight: float
                   ) -> tuple[dict[int, float], dict[int, int]]:
    """The best `depth` documents holding any of `words` (lexemes) by BM25 over the whole
    document, as SQLite's documents_fts ranks them: (doc id -> score, doc id -> its first
    chunk). A word's frequency in a document is its title occurrences (weighted
    `title_weight`) plus its occurrences in the text of every chunk; the document's length
    is its chunks' tokens, and the average length every chunk's tokens over the documents."""
    (docs, tokens), = rows("SELECT (SELECT count(*) FROM documents), "
                           "(SELECT coalesce(sum(tokens), 0) FROM chunks)", ())
    if not words or not docs or not tokens:
        return {}, {}
    held = dict(rows("SELECT w, (SELECT count(DISTINCT c.doc_id) FROM chunks c WHERE c.tsv @@ "
                     "quote_literal(w)::tsquery) FROM unnest(%s::text[]) w", (list(words),)))
    where = "" if allowed is None else " AND c.doc_id = ANY(%(allowed)s)"
    if negated:
        where += (" AND NOT EXISTS (SELECT 1 FROM chunks x WHERE x.doc_id = c.doc_id AND "
                  f"x.tsv @@ websearch_to_tsquery('{schema.TEXT_CONFIG}', %(negated)s))")
    found = rows(
        "WITH m AS (SELECT c.doc_id, c.tsv FROM chunks c WHERE c.tsv @@ %(any)s::tsquery"
        f"{where} LIMIT %(limit)s), "
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
         "limit": DOCUMENT_POSTINGS, "negated": negated,
         "allowed": None if allowed is None else list(allowed)})
    average = float(tokens) / float(docs)
    scores: dict[int, float] = {}
    first: dict[int, int] = {}
    for doc_id, word, title, text, length, head in found:
        n = int(held.get(word) or 0)
        weight = math.log((docs - n + 0.5) / (n + 0.5))
        freq = title_weight * float(title or 0) + float(text or 0)
        norm = K1 * ((1 - B) + B * float(length or 0) / average)
        doc = int(doc_id)
        scores[doc] = scores.get(doc, 0.0) + (weight if weight > 0.0 else 1e-6) * (
            freq * (K1 + 1.0)) / (freq + norm)
        if head is not None:
            first[doc] = int(head)
    best = sorted(scores, key=lambda d: (-scores[d], d))[:depth]
    return {d: scores[d] for d in best}, {d: first[d] for d in best if d in first}


def _chunks_holding(rows: Rows, words: Sequence[str]) -> list[int]:
    """How many chunks hold each lexeme (counted whole, not up to a cap)."""
    return [int(n) for _, n in rows(
        "SELECT w, (SELECT count(*) FROM chunks c WHERE c.tsv @@ quote_literal(w)::tsquery) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS t(w, i) ORDER BY i", (list(words),))]


def _chunk_count(rows: Rows) -> int:
    """The chunks in the index: the planner's estimate (free) once the table has been
    analysed, else counted."""
    estimate = rows("SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass", ())
    if estimate and estimate[0][0] is not None and float(estimate[0][0]) > 0:
        return int(float(estimate[0][0]))
    return int(rows("SELECT count(*) FROM chunks", ())[0][0])
