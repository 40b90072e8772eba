"""The keyword search of a small folder keeps the words that name its topics, even when a
large share of its chunks hold them; a large index still drops its common words."""

from __future__ import annotations

from pocketmcp.core.keywords import query_words


def test_a_small_index_keeps_words_held_by_many_of_its_chunks() -> None:
    # 1,000 chunks of a tool's docs: "environment" is in 300 of them, yet it is what the
    # question is about.
    df = {"environ": 300, "matrix": 12, "python": 450}  # stems, as the index holds them
    kept = query_words("python environment matrix", df, 1_000)
    assert kept == [("python", 450), ("environment", 300), ("matrix", 12)]


def test_a_large_index_still_drops_its_common_words() -> None:
    df = {"environ": 30_000, "matrix": 1_200, "python": 45_000}
    kept = query_words("python environment matrix", df, 100_000)
    assert kept == [("matrix", 1_200)]
