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

With one match per document (`documents`), documents rank as SQLite's do, by BM25 over the
whole document (doc_words.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pocketmcp.core.keywords import reference_bm25
from pocketmcp.store.pg import doc_words, schema
from pocketmcp.store.rows import Keywords

Rows = Callable[[str, Sequence[Any] | Mapping[str, Any]], list[Any]]

# ts_rank_cd's weights of D, C (text), B (section path), A (title); at most 1 each.
_TEXT_WEIGHT = 0.5
COMMON_WORD = 2000  # chunks holding a word beyond which it is too common to search alone
CANDIDATES = 5000  # matching chunks ranked for one query, at most
MAX_WORDS = 12  # rarest words searched, as SQLite's keyword search keeps
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
                  title_weight: float, documents: bool = False, best_chunks: bool = False,
                  key: str = "") -> Keywords:
    """Best chunks for the query's words (the module's docstring says how they are chosen
    and ranked), and with `documents`, best whole documents by BM25 (`document_stage`).
    The 0..1 scale's midpoint (`reference`) is the score of a text holding each searched
    word once, ten words apart, as SQLite's is the BM25 of a text of average length holding
    each word once; with `documents`, that BM25 itself (`reference_bm25`, as SQLite's), the
    scale of the documents' scores. `key` names the index (its statistics are kept a
    while: doc_words.py). With `best_chunks` (an index of long pages), documents rank by
    their best chunk's BM25 instead, as SQLite's chunks are scored (`best_chunk_stage`)."""
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
    if documents or best_chunks:
        stage = doc_words.best_chunk_stage if best_chunks else doc_words.document_stage
        found.doc_keyword, found.first_chunk = stage(
            rows, [w for _, w in kept], depth, allowed, negated, title_weight, key=key)
        # As SQLite's: the BM25 of a text of average length holding each word once (a
        # count stopped at the cap is counted whole).
        found.reference = reference_bm25(
            doc_words.chunks_holding(rows, kept, COMMON_WORD), total)
    return found


def _chunk_count(rows: Rows) -> int:
    """The chunks in the index: the planner's estimate (free) once the table has been
    analysed, else counted."""
    estimate = rows("SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass", ())
    if estimate and estimate[0][0] is not None and float(estimate[0][0]) > 0:
        return int(float(estimate[0][0]))
    return int(rows("SELECT count(*) FROM chunks", ())[0][0])
