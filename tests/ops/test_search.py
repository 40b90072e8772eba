"""Search modes, fusion options, filters and keyword/vector consistency, through the tools
in process."""

from __future__ import annotations

from conftest import Tools


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


async def test_keyword_results_follow_updates_and_deletes(tools: Tools) -> None:
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


async def test_a_filter_still_returns_k_results_when_k_exist(tools: Tools) -> None:
    many = [(f"noise{i}", f"Noise note {i} about rocket launches and orbital mechanics.")
            for i in range(40)]
    paragraphs = "\n\n".join(f"Paragraph {i}: recipes for soup number {i}, with leeks." * 6
                             for i in range(24))
    ids = await tools.add(*many, ("soup", paragraphs))
    only_soup = {"doc_ids": [ids["soup"]]}
    chunk_count = len(await tools.search("soup", mode="keyword", top_k=50, filter=only_soup))
    assert chunk_count >= 5
    # The query is about rockets: every nearest neighbour is outside the filter, yet k
    # results from the allowed document come back, in every mode that can find them.
    for mode in ("vector", "hybrid"):
        found = await tools.search("rocket launch orbit", mode=mode, top_k=5, filter=only_soup)
        assert len(found) == 5 and {m["doc_id"] for m in found} == {ids["soup"]}


async def test_whole_document_keywords_find_words_spread_over_chunks(tools: Tools) -> None:
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


async def test_unique_docs_keeps_the_best_chunk_of_each_document(tools: Tools) -> None:
    long_text = "\n\n".join(f"Section {i}. Volcanoes erupt lava and ash, part {i}." * 8
                            for i in range(6))
    ids = await tools.add(("volcano", long_text),
                          ("other", "A short note about geysers and volcanic heat."))
    every = await tools.search("volcano eruption", top_k=10)
    assert [m["doc_id"] for m in every].count(ids["volcano"]) > 1
    unique = await tools.search("volcano eruption", top_k=10, unique_docs=True)
    assert sorted(m["doc_id"] for m in unique) == sorted(ids.values())


async def test_context_joins_neighbouring_chunks_without_repeating_overlaps(
    tools: Tools
) -> None:
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
    found = await tools.search("penguins in the south", mode="vector")
    assert found[0]["doc_id"] == ids["a"]
    for m in found:  # float16 copies: close to the exact cosine
        assert abs(m["vector_score"] - exact[m["chunk_id"]]) < 2e-3
        assert m["score"] == m["vector_score"]
    similar = (await tools("find_similar_documents", text="penguins in the south"))["results"]
    assert [s["chunk_id"] for s in similar] == [m["chunk_id"] for m in found]
    for s in similar:  # rescored from the float32 vectors
        assert abs(s["score"] - exact[s["chunk_id"]]) < 1e-6
