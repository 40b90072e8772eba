"""The keyword retriever over SQLite's FTS5 tables: BM25 over chunks (and whole documents)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

from pocketmcp.core import cjk
from pocketmcp.core.keywords import match_of, query_words, reference_bm25, terms, vocab_terms
from pocketmcp.store.rows import Keywords
from pocketmcp.store.sqlite.keywords import bm25


class TermCounts:
    """Chunks holding each term, remembered for one state of the index (shared by a pool's
    connections). Counting a common term reads its whole posting list: 3-8 ms each at 1M
    chunks, about 10 ms a query, for the same few hundred common words query after query.
    Any commit that changes chunks changes the state, and forgets them all."""

    LIMIT = 100_000  # terms remembered; past it, forgotten all at once

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: Hashable = None
        self._counts: dict[str, int] = {}

    def get(self, state: Hashable, terms: Sequence[str],
            count: Callable[[list[str]], dict[str, int]]) -> dict[str, int]:
        """The count of each of `terms` held (0s left out), `count` asked for the others
        (it leaves out those no chunk holds), as of `state`."""
        with self._lock:
            if state != self._state:
                self._state, self._counts = state, {}
            known = {t: self._counts[t] for t in terms if t in self._counts}
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        if missing:
            found = count(missing)
            with self._lock:
                if state == self._state:
                    if len(self._counts) + len(missing) > self.LIMIT:
                        self._counts = {}
                    self._counts.update((t, found.get(t, 0)) for t in missing)
            known.update(found)
        return {t: n for t, n in known.items() if n}


class FtsReader(Protocol):
    """What the keyword stage reads (store/sqlite/queries.py's SqliteReader has it)."""

    def term_docs(self, terms: Sequence[str]) -> dict[str, int]: ...
    def search_keyword(self, match: str, k: int, doc_ids: Sequence[int] | None = None,
                       title_weight: float = 1.0, postings: int = 0,
                       words: Sequence[str] = ()) -> list[tuple[int, float, int]]: ...
    def search_documents(self, match: str, k: int, doc_ids: Sequence[int] | None = None,
                         title_weight: float = 1.0) -> list[tuple[int, float]]: ...
    def first_chunks(self, doc_ids: Sequence[int]) -> dict[int, int]: ...


def keyword_stage(reader: FtsReader, query: str, depth: int, allowed: Sequence[int] | None,
                  *, title_weight: float, total: int, documents: bool,
                  alone: bool = False) -> Keywords:
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
    # Alone (keyword mode), a large chunk query runs in two halves at once (halves.py);
    # beside the query embedding and the vector stage it would only take their core.
    postings = sum(n for _, n in kept)
    # Plain words over many postings are scored in numpy (bm25.py); a CJK word is a phrase,
    # for FTS5, which is also quicker for a few postings.
    plain = () if postings < bm25.FROM_POSTINGS or any(cjk.has_cjk(w) for w, _ in kept) \
        else tuple(w for w, _ in kept)
    for chunk_id, score, doc_id in reader.search_keyword(match, depth, allowed, title_weight,
                                                         postings if alone else 0, plain):
        found.keyword[chunk_id] = score
        found.doc_of[chunk_id] = doc_id
    if documents:
        found.doc_keyword = dict(reader.search_documents(match, depth, allowed, title_weight))
        found.first_chunk = reader.first_chunks(sorted(found.doc_keyword))
    return found
