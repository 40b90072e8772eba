"""Keyword scoring's pure parts."""

from __future__ import annotations

import math

from pocketmcp.core.keywords import POSTINGS_BUDGET, query_words, reference_bm25


def test_the_reference_score_survives_counts_read_while_the_index_grows() -> None:
    # A word's document count read after more documents were written than the total.
    assert reference_bm25([5], 3) == 1e-6
    assert reference_bm25([1, 7], 4) == math.log(3.5 / 1.5) + 1e-6
    assert reference_bm25([], 10) == 1.0


def test_a_large_index_scores_at_most_twenty_thousand_postings_per_query() -> None:
    # At 1M chunks every posting costs a row-length lookup in bm25(): the rarest word is
    # always searched, the next only while the sum stays within the budget.
    df = {"mitochondria": 14_000, "protein": 7_000, "express": 900}
    kept = query_words("mitochondria protein expression", df, 1_000_000)
    assert kept == [("protein", 7_000), ("expression", 900)]
    assert sum(n for _, n in kept) <= POSTINGS_BUDGET == 20_000
