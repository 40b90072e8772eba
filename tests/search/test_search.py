"""Search modes, fusion options, filters and keyword/vector consistency, through the tools
in process: on the real model where what a query means decides the result, on the
deterministic embedder where only the mechanics do (keywords, filters, context)."""

from __future__ import annotations

import pytest
from support.tools import Tools

from pocketmcp.core.calibration import calibrated
from pocketmcp.embed.background import model_background


async def test_keyword_mode_needs_the_words_and_vector_mode_needs_the_meaning(
    tools: Tools
) -> None:
    ids = await tools.add(("cars", "Automobiles need their oil changed every ten thousand km."),
                          ("code", "The function zxq_parse_header returns a dictionary."),
                          ("tea", "Green tea is steeped in water below boiling."))
    keyword = await tools.search("zxq_parse_header", mode="keyword")
    assert [m["doc_id"] for m in keyword] == [ids["code"]]
    assert keyword[0]["keyword_score"] is not None and keyword[0]["vector_score"] is None
    # No shared word with "Automobiles ... oil": only meaning can find it.
    assert await tools.search("vehicle engine maintenance", mode="keyword") == []
    vector = await tools.search("vehicle engine maintenance", mode="vector", top_k=1)
    assert [m["doc_id"] for m in vector] == [ids["cars"]]
    hybrid = await tools.search("zxq_parse_header", mode="hybrid", top_k=3)
    assert hybrid[0]["doc_id"] == ids["code"]
    assert hybrid[0]["keyword_score"] is not None and hybrid[0]["vector_score"] is not None


async def test_keyword_results_follow_updates_and_deletes(fake_tools: Tools) -> None:
    tools = fake_tools
    ids = await tools.add(("n", "The quarterly report mentions flamingos."))

    async def found(query: str, **args: object) -> list[int]:
        return [m["doc_id"] for m in await tools.search(query, **args)]

    assert await found("flamingos", mode="keyword") == [ids["n"]]
    await tools.add(("n", "The quarterly report now mentions pelicans."))
    assert await found("flamingos", mode="keyword") == []
    assert await found("pelicans", mode="keyword") == [ids["n"]]
    # Whole-document keyword search (one match per document) follows too.
    assert await found("pelicans", mode="keyword", unique_docs=True) == [ids["n"]]
    assert await found("flamingos", mode="keyword", unique_docs=True) == []
    await tools("delete_documents", external_ids=["n"])
    assert await found("pelicans", mode="keyword") == []
    assert await found("pelicans", mode="keyword", unique_docs=True) == []
    assert await found("pelicans", mode="vector") == []


async def test_a_filter_still_returns_k_results_when_k_exist(fake_tools: Tools) -> None:
    tools = fake_tools
    many = [(f"noise{i}", f"Noise note {i} about rocket launches and orbital mechanics.")
            for i in range(40)]
    paragraphs = "\n\n".join(f"Paragraph {i}: recipes for soup number {i}, with leeks." * 6
                             for i in range(24))
    ids = await tools.add(*many, ("soup", paragraphs))
    only_soup = {"doc_ids": [ids["soup"]]}
    chunk_count = len(await tools.search("soup", mode="keyword", top_k=50, filter=only_soup,
                                         max_per_doc=0))
    assert chunk_count >= 5
    # The query is about rockets: every nearest neighbour is outside the filter, yet k
    # results from the allowed document come back, in every mode that can find them.
    for mode in ("vector", "hybrid"):
        found = await tools.search("rocket launch orbit", mode=mode, top_k=5, filter=only_soup,
                                   max_per_doc=0, score_threshold=0)
        assert len(found) == 5 and {m["doc_id"] for m in found} == {ids["soup"]}


async def test_whole_document_keywords_find_words_spread_over_chunks(fake_tools: Tools) -> None:
    tools = fake_tools
    # "quasar" and "telescope" never share a chunk, but they share the document.
    filler = " ".join(f"Sentence {i} is filler about nothing in particular." for i in range(24))
    others = [(f"other{i}", f"Note {i} on gardening and cooking. {filler}") for i in range(20)]
    ids = await tools.add(*others,
                          ("spread", f"The quasar was bright. {filler} The telescope was old."),
                          ("quasar-only", f"A quasar is an active galactic nucleus. {filler}"),
                          ("telescope-only", f"The telescope has a large mirror. {filler}"))
    spread = await tools.search("quasar", mode="keyword", top_k=10,
                                filter={"doc_ids": [ids["spread"]]})
    assert {m["idx"] for m in spread} == {0}  # the two words are in different chunks
    found = await tools.search("quasar telescope", mode="keyword", unique_docs=True)
    assert found[0]["doc_id"] == ids["spread"]


async def test_an_index_of_long_pages_ranks_documents_by_their_best_chunk_for_words(
        fake_tools: Tools) -> None:
    tools = fake_tools

    def page(topic: str, marks: dict[int, str]) -> str:
        """Eight paragraphs of about 900 characters (a chunk each), some with a word added."""
        body = " ".join(f"Line {j} of the {topic} page says little of note." for j in range(18))
        return "\n\n".join(f"{marks.get(i, '')} {body}".strip() for i in range(8))

    # "spread" says each word three times, never in one paragraph; "together" says both
    # once, side by side. Over whole documents "spread" has more of the words; its best
    # chunk has one of them, "together"'s both.
    ids = await tools.add(
        *((f"filler{i}", page(f"gardening {i}", {})) for i in range(4)),
        ("spread", page("astronomy", {1: "A quasar.", 2: "A telescope.", 3: "A quasar.",
                                      4: "A telescope.", 5: "A quasar.", 6: "A telescope."})),
        ("together", page("optics", {4: "The quasar telescope."})))
    spread = await tools.search("quasar", mode="keyword", top_k=10, max_per_doc=0,
                                filter={"doc_ids": [ids["spread"]]})
    assert len({m["idx"] for m in spread}) == 3  # the words sit in chunks of their own
    found = await tools.search("quasar telescope", mode="keyword", unique_docs=True)
    assert [m["doc_id"] for m in found] == [ids["together"], ids["spread"]]
    hybrid = await tools.search("quasar telescope", unique_docs=True, score_threshold=0)
    assert hybrid[0]["doc_id"] == ids["together"]


async def test_unique_docs_keeps_the_best_chunk_of_each_document(tools: Tools) -> None:
    long_text = "\n\n".join(f"Section {i}. Volcanoes erupt lava and ash, part {i}." * 8
                            for i in range(6))
    ids = await tools.add(("volcano", long_text),
                          ("other", "A short note about geysers and volcanic heat."))
    every = await tools.search("volcano eruption", top_k=10, max_per_doc=0)
    assert [m["doc_id"] for m in every].count(ids["volcano"]) > 1
    unique = await tools.search("volcano eruption", top_k=10, unique_docs=True)
    assert sorted(m["doc_id"] for m in unique) == sorted(ids.values())


async def test_context_joins_neighbouring_chunks_without_repeating_overlaps(
    fake_tools: Tools
) -> None:
    tools = fake_tools
    text = "\n\n".join(f"Part {i} of the saga tells of dragon number {i} and its hoard." * 5
                       for i in range(8))
    ids = await tools.add(("saga", text))
    stored = (await tools("get_document", doc_id=ids["saga"]))["text"]
    [match] = await tools.search("dragon number 4 hoard", top_k=1, mode="keyword")
    [with_context] = await tools.search("dragon number 4 hoard", top_k=1, mode="keyword",
                                        context=1)
    chunk = stored[match["start_off"]:match["end_off"]]
    assert with_context["context"] is not None
    assert chunk in with_context["context"]
    assert len(with_context["context"]) > len(chunk)
    # The context is a contiguous slice of the document.
    assert with_context["context"] in text


async def test_score_threshold_drops_weak_matches(tools: Tools) -> None:
    await tools.add(("a", "Penguins live in the southern hemisphere."),
                    ("b", "Compilers translate source code into machine code."))
    strict = await tools.search("penguins", mode="vector", score_threshold=0.4)
    assert len(strict) == 1


async def test_vector_scores_are_cosine_similarities_and_find_similar_is_exact(
    tools: Tools
) -> None:
    ids = await tools.add(("a", "Penguins live in the southern hemisphere."),
                          ("b", "Compilers translate source code into machine code."))
    reading = await tools.rt.reading()
    query = await reading.embedder.embed_query("penguins in the south")
    stored = await reading.index.run(lambda r: r.vectors_by_ids(list(range(1, 10)), 384))
    exact = dict(zip(stored[0].tolist(), (stored[2] @ query).tolist(), strict=True))
    found = await tools.search("penguins in the south", mode="vector", score_threshold=0)
    base = await model_background(reading.embedder)
    assert 0.0 < base < 0.2  # MiniLM: unrelated texts sit near 0
    assert found[0]["doc_id"] == ids["a"]
    for m in found:  # float16 copies: close to the exact cosine
        assert abs(m["vector_score"] - exact[m["chunk_id"]]) < 2e-3
        # the score: the cosine read against the model's background
        assert m["score"] == pytest.approx(calibrated(m["vector_score"], base), abs=1e-5)
    similar = (await tools("find_similar_documents", text="penguins in the south"))["results"]
    assert [s["chunk_id"] for s in similar] == [m["chunk_id"] for m in found]
    for s in similar:  # rescored from the float32 vectors
        assert abs(s["score"] - exact[s["chunk_id"]]) < 1e-6


async def test_scores_lie_between_0_and_1_in_every_mode_and_one_threshold_fits_all(
    tools: Tools
) -> None:
    await tools.add(*[(f"n{i}", f"Note {i}: penguins huddle together in the Antarctic winter "
                                f"to keep warm, colony {i}.") for i in range(6)],
                    ("c", "Compilers translate source code into machine code."))
    for mode in ("hybrid", "vector", "keyword"):
        found = await tools.search("penguins huddle in winter", mode=mode, top_k=10)
        assert found and all(0.0 <= m["score"] <= 1.0 for m in found), (mode, found)
        strict = await tools.search("penguins huddle in winter", mode=mode, top_k=10,
                                    score_threshold=0.3)
        assert strict and all(m["score"] >= 0.3 for m in strict)
        assert all(m["doc_id"] != found[-1]["doc_id"] or m["score"] >= 0.3 for m in strict)
    # The compilers note shares no word and little meaning: the default threshold drops it,
    # and a question from outside the corpus finds nothing over it (the best few come back
    # under the threshold, with a notice saying so; none with a strict threshold).
    kept = await tools.search("penguins huddle in winter", top_k=10)
    assert kept and all("Compilers" not in m["preview"] for m in kept)
    everything = await tools.search("penguins huddle in winter", top_k=10, score_threshold=0)
    assert any("Compilers" in m["preview"] for m in everything)
    outside = await tools("search", query="quarterly revenue of a shoe company")
    assert all(m["score"] < 0.2 for m in outside["matches"])
    assert "no match reached score_threshold 0.2" in outside["notice"]
    assert await tools.search("quarterly revenue of a shoe company",
                              strict_threshold=True) == []


async def test_matches_of_one_document_are_capped_and_neighbours_merged(tools: Tools) -> None:
    text = "\n\n".join(f"## Part {i}\n\n" + f"Volcanoes erupt lava and ash, part {i}. " * 8
                         for i in range(8))
    ids = await tools.add(("volcano", text),
                          ("geyser", "A short note about geysers and volcanic heat."))
    found = await tools.search("volcano eruption lava ash", top_k=8)
    from_volcano = [m for m in found if m["doc_id"] == ids["volcano"]]
    assert 1 <= len(from_volcano) <= 2
    merged = [m for m in from_volcano if m["merged_idx"]]
    assert merged, from_volcano
    m = merged[0]
    assert m["idx"] in m["merged_idx"] and m["merged_idx"] == list(
        range(m["merged_idx"][0], m["merged_idx"][-1] + 1))
    stored = (await tools("get_document", doc_id=ids["volcano"]))["text"]
    # The passage is the document's text from the first merged chunk to the last.
    assert m["context"].split() == stored[m["start_off"]:m["end_off"]].split()
    every = await tools.search("volcano eruption lava ash", top_k=8, max_per_doc=0)
    assert sum(x["doc_id"] == ids["volcano"] for x in every) > 2
