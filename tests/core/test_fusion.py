"""Fusion and keyword-query building as pure, table-driven functions."""

from __future__ import annotations

import pytest

from pocketmcp.core.fusion import convex, minmax, ranked, rrf
from pocketmcp.core.keywords import fts_query, terms


@pytest.mark.parametrize(
    ("lists", "weights", "k", "expected"),
    [
        # One list: order kept.
        ([[3, 1, 2]], None, 60, [3, 1, 2]),
        # Agreement wins: 2 is second in both, 1 and 3 first in one and absent in the other.
        ([[1, 2], [3, 2]], None, 60, [2, 1, 3]),
        # A weight of zero silences a list.
        ([[1, 2], [2, 1]], [1.0, 0.0], 60, [1, 2]),
        # Small k makes the head of each list count for more.
        ([[1, 2, 3], [4, 3, 2]], [1.0, 1.0], 1, [2, 3, 1, 4]),
        ([], None, 60, []),
    ],
)
def test_rrf_orders_by_summed_reciprocal_ranks(lists, weights, k, expected) -> None:
    assert ranked(rrf(lists, weights, k)) == expected


def test_rrf_score_is_weight_over_k_plus_rank() -> None:
    assert rrf([[7, 8]], [2.0], k=60) == {7: 2 / 61, 8: 2 / 62}


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ({1: 2.0, 2: 4.0, 3: 3.0}, {1: 0.0, 2: 1.0, 3: 0.5}),
        ({1: 5.0, 2: 5.0}, {1: 1.0, 2: 1.0}),
        ({}, {}),
        ({1: -3.0, 2: -1.0}, {1: 0.0, 2: 1.0}),
    ],
)
def test_minmax_scales_into_unit_range(scores, expected) -> None:
    assert minmax(scores) == expected


@pytest.mark.parametrize(
    ("lists", "weights", "expected"),
    [
        # Vector says 1 > 2, keyword says 2 >> 1: the weights decide.
        ([{1: 0.9, 2: 0.5}, {2: 10.0, 1: 1.0}], [0.8, 0.2], [1, 2]),
        ([{1: 0.9, 2: 0.5}, {2: 10.0, 1: 1.0}], [0.2, 0.8], [2, 1]),
        # Missing from a list counts as its minimum: 1 and 3 tie at 0.5, then 2 (0.4375).
        ([{1: 0.9, 2: 0.8, 3: 0.1}, {3: 5.0, 4: 4.0}], [0.5, 0.5], [1, 3, 2, 4]),
    ],
)
def test_convex_combines_normalised_scores(lists, weights, expected) -> None:
    assert ranked(convex(lists, weights)) == expected


def test_one_weight_per_list_is_required() -> None:
    with pytest.raises(ValueError, match="one weight per list"):
        rrf([[1]], [1.0, 2.0])
    with pytest.raises(ValueError, match="one weight per list"):
        convex([{1: 1.0}], [])


def test_ties_break_by_id() -> None:
    assert ranked({5: 1.0, 2: 1.0, 9: 2.0}) == [9, 2, 5]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What is the role of the p53 protein in cancer?", ["role", "p53", "protein", "cancer"]),
        ("the the and of", []),
        ('say "hi" AND NOT x OR y*', ["say", "hi"]),
        ("Café crème, café", ["café", "crème"]),
    ],
)
def test_terms_keep_distinct_content_words(query, expected) -> None:
    assert terms(query) == expected


def test_fts_query_quotes_every_term_and_ors_them() -> None:
    assert fts_query('p53 "mutant" NEAR') == '"p53" OR "mutant" OR "near"'
    assert fts_query("of the") is None


def test_keyword_queries_keep_the_rarest_words_within_the_budgets() -> None:
    from pocketmcp.core.keywords import stems

    words = ["protein", "mitochondria", "cells", "expression"]
    df = dict(zip(stems(words), [5_000, 40, 90_000, 20_000], strict=True))
    # Rarest first; "cells" is in 9% of 1M chunks but would break the postings budget.
    assert fts_query("protein mitochondria cells expression", df, total=1_000_000,
                     budget=30_000) == '"protein" OR "mitochondria" OR "expression"'
    assert fts_query("protein mitochondria cells expression", df, total=1_000_000,
                     budget=10_000) == '"protein" OR "mitochondria"'
    # A word in more than 10% of the chunks goes even when the budget would allow it.
    assert fts_query("cells", df, total=1_000_000) == '"cells"'  # ...unless it is the only one
    assert fts_query("cells mitochondria", df, total=100_000,
                     budget=10**9) == '"mitochondria"'
    # Unknown stems count as rare.
    assert fts_query("zyxwv cells", {}, total=1000) == '"zyxwv" OR "cells"'


def test_in_a_small_index_no_word_is_too_common_to_search_for() -> None:
    from pocketmcp.core.keywords import stems

    df = dict(zip(stems(["temple", "kyoto", "visit"]), [3, 2, 5], strict=True))
    # 8 chunks: every word is in more than 10% of them, yet each tells some apart.
    assert fts_query("temple kyoto visit", df, total=8) == '"temple" OR "kyoto" OR "visit"'
    # In a large index the share decides again.
    df = dict(zip(stems(["temple", "kyoto", "visit"]), [300, 2, 5_000], strict=True))
    assert fts_query("temple kyoto visit", df, total=20_000) == '"temple" OR "kyoto"'
