"""The keyword retriever over SQLite's FTS5 tables: BM25 over chunks (and whole documents)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pocketmcp.core.keywords import match_of, query_words, reference_bm25, terms, vocab_terms
from pocketmcp.store.rows import Keywords

if TYPE_CHECKING:
    from pocketmcp.store.queries import IndexReader


def keyword_stage(reader: IndexReader, query: str, depth: int, allowed: Sequence[int] | None,
                  *, title_weight: float, total: int, documents: bool) -> Keywords:
    """Best chunks (and with `documents`, best whole documents) by BM25: the query's words
    that are rare enough to tell documents apart, any of them."""
    found = Keywords()
    words = terms(query)
    if not words:
        return found
    kept = query_words(query, reader.term_docs(vocab_terms(words)), total)
    if not kept:
        return found
    match = match_of(kept)
    found.reference = reference_bm25([n for _, n in kept], total)
    for chunk_id, score, doc_id in reader.search_keyword(match, depth, allowed, title_weight):
        found.keyword[chunk_id] = score
        found.doc_of[chunk_id] = doc_id
    if documents:
        found.doc_keyword = dict(reader.search_documents(match, depth, allowed, title_weight))
        found.first_chunk = reader.first_chunks(sorted(found.doc_keyword))
    return found
