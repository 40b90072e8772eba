"""The keyword retriever on Postgres: BM25 as SQLite's FTS5 computes it (store/sqlite/keywords/),
over the same terms and lengths (tokens.py).

The query's words are chosen as SQLite's are (core/keywords.py's `query_words`: stop words
dropped, the rarest first, at most MAX_QUERY_TERMS), each counted in the chunks up to
COMMON_WORD + 1: none held by more than COMMON_WORD chunks (the rarest word always), and no
more than CANDIDATES matching chunks in all, so the cost stays bounded however common the
query's words are. The chunks holding any of them are scored by FTS5's BM25 (doc_words.py)
and the best `depth` kept. Words written as `-word` (or `-"a phrase"`) exclude the chunks
that hold them.

With one match per document (`documents`), documents rank as SQLite's do, by BM25 over the
whole document (doc_words.py); in an index of long pages, by their best chunk, which the
chunks' list already says (as SQLite's)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pocketmcp.core.keywords import query_words, reference_bm25, terms, vocab_terms
from pocketmcp.store.pg import doc_words, tokens
from pocketmcp.store.rows import Keywords

Rows = Callable[[str, Sequence[Any] | Mapping[str, Any]], list[Any]]

COMMON_WORD = 2000  # chunks holding a word beyond which it is too common to search alone
CANDIDATES = 5000  # matching chunks ranked for one query, at most
_NEGATED = re.compile(r'(?:^|(?<=\s))-("[^"]*"?|[^\s"]+)')


def split_negated(query: str) -> tuple[str, str]:
    """(the query without its `-word` and `-"phrase"` parts, those parts joined by `or`, as
    websearch_to_tsquery reads a query)."""
    negated = [m.group(1) for m in _NEGATED.finditer(query)]
    return _NEGATED.sub(" ", query), " or ".join(negated)


def negated_query(query: str) -> str:
    """The tsquery of a query's `-word` and `-"phrase"` parts (any of them); '' for none."""
    parts = [m.group(1).strip('"') for m in _NEGATED.finditer(query)]
    return " | ".join(f"({tokens.query_of(found)})" for found in tokens.terms(parts) if found)


def _key_query(key: str) -> str:
    """The tsquery of one of `vocab_terms`'s terms: "x*" is any term starting with x."""
    if key.endswith("*") and len(key) > 1:
        return tokens.literal(key[:-1]) + ":*" + tokens.CHUNK_WEIGHTS
    return tokens.query_of([key], tokens.CHUNK_WEIGHTS)


def keyword_stage(rows: Rows, query: str, depth: int, allowed: Sequence[int] | None, *,
                  title_weight: float, documents: bool = False, key: str = "") -> Keywords:
    """Best chunks for the query's words by FTS5's BM25 (the module's docstring says which
    words), and with `documents`, best whole documents by BM25 (`document_stage`). The 0..1
    scale's midpoint (`reference`) is SQLite's: the BM25 of a text of average length
    holding each word once. `key` names the index (its totals are kept a while:
    doc_words.py)."""
    found = Keywords()
    if allowed is not None and not allowed:
        return found
    positive, _ = split_negated(query)
    words = terms(positive)
    if not words:
        return found
    spelled = dict(zip(words, tokens.terms(words), strict=True))  # as the index holds them
    looked = sorted(set(vocab_terms(words)) | {t for found in spelled.values() for t in found})
    counted = rows(  # chunks holding each term, counted up to COMMON_WORD + 1
        "SELECT t.w, (SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE c.tsv @@ t.q::tsquery "
        "LIMIT %s) s) FROM unnest(%s::text[], %s::text[]) AS t(w, q)",
        (COMMON_WORD + 1, looked, [_key_query(k) for k in looked]))
    df = {str(w): int(n) for w, n in counted if n}
    total, _ = doc_words.chunk_totals(rows, key)
    kept = query_words(positive, df, total, common=0.0, budget=CANDIDATES)
    phrases = list(dict.fromkeys(tuple(spelled[w]) for w, _ in kept if spelled.get(w)))
    if not phrases:
        return found
    lexemes = list(dict.fromkeys(t for p in phrases for t in p))
    negated = negated_query(query)
    scores, doc_of = doc_words.chunk_scores(rows, phrases, allowed, negated, title_weight,
                                            key=key)
    for chunk_id in sorted(scores, key=lambda c: (-scores[c], c))[:depth]:
        found.keyword[chunk_id] = scores[chunk_id]
        found.doc_of[chunk_id] = doc_of[chunk_id]
    # As SQLite's: the BM25 of a text of average length holding each word once (a count
    # stopped at the cap is counted whole).
    found.reference = reference_bm25(doc_words.chunks_holding(
        rows, [(n, _key_query(vocab_terms([w])[0])) for w, n in kept], COMMON_WORD), total)
    if documents:
        found.doc_keyword, found.first_chunk = doc_words.document_stage(
            rows, lexemes, depth, allowed, negated, title_weight, key=key)
    return found
