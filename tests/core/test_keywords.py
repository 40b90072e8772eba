"""Keyword scoring's pure parts."""

from __future__ import annotations

import math

from pocketmcp.core.keywords import reference_bm25


def test_the_reference_score_survives_counts_read_while_the_index_grows() -> None:
    # A word's document count read after more documents were written than the total.
    assert reference_bm25([5], 3) == 1e-6
    assert reference_bm25([1, 7], 4) == math.log(3.5 / 1.5) + 1e-6
    assert reference_bm25([], 10) == 1.0
