"""When `score_threshold` removes every match, the reply says so and still shows the best few
(marked as under the threshold in the notice), unless the caller asks for a strict threshold."""

from __future__ import annotations

from support.tools import Tools

from pocketmcp.search.floor import Removed, kept_anyway, notice


async def test_a_threshold_that_removes_everything_keeps_the_best_and_says_so(
    tools: Tools
) -> None:
    ids = await tools.add(("a", "Penguins live in the southern hemisphere and eat krill."),
                          ("b", "Compilers translate source code into machine code."),
                          ("c", "Sourdough bread rises slowly overnight in a cool kitchen."))
    reply = await tools("search", query="where do penguins live", score_threshold=0.99)
    matches = reply["matches"]
    assert matches, "a threshold above every score must not answer with nothing"
    assert matches[0]["doc_id"] == ids["a"]
    assert len(matches) <= 3
    assert all(m["score"] < 0.99 for m in matches)
    assert len({m["doc_id"] for m in matches}) == len(matches)
    text = reply["notice"]
    assert "no match reached score_threshold 0.99" in text
    assert f"best score {matches[0]['score']:.3f}" in text
    assert "under the threshold" in text


async def test_a_strict_threshold_returns_nothing_but_still_says_what_it_removed(
    tools: Tools
) -> None:
    await tools.add(("a", "Penguins live in the southern hemisphere and eat krill."),
                    ("b", "Compilers translate source code into machine code."))
    reply = await tools("search", query="where do penguins live", score_threshold=0.99,
                        strict_threshold=True)
    assert reply["matches"] == []
    assert "no match reached score_threshold 0.99" in reply["notice"]
    assert "removed" in reply["notice"]


async def test_matches_over_the_threshold_come_without_a_notice(tools: Tools) -> None:
    ids = await tools.add(("a", "Penguins live in the southern hemisphere and eat krill."),
                          ("b", "Compilers translate source code into machine code."))
    reply = await tools("search", query="penguins southern hemisphere", score_threshold=0.3)
    assert [m["doc_id"] for m in reply["matches"]] == [ids["a"]]
    assert reply.get("notice") is None


def test_the_kept_matches_are_the_best_one_per_document() -> None:
    removed = Removed(0.5)
    for chunk, score in [(1, 0.1), (2, 0.3), (3, 0.29), (4, 0.2), (5, 0.05)]:
        removed.add(chunk, score)
    doc_of = {1: 10, 2: 20, 3: 20, 4: 30, 5: 40}
    assert kept_anyway(removed, doc_of, {1, 2, 3, 4, 5}, 3) == [(2, 0.3), (4, 0.2), (1, 0.1)]
    # A chunk gone from the index since the lists were made is not shown.
    assert kept_anyway(removed, doc_of, {1, 3, 4}, 2) == [(3, 0.29), (4, 0.2)]
    assert "5 removed (best score 0.300)" in notice(removed, 2)
    assert "best 2 matches are shown" in notice(removed, 2)
