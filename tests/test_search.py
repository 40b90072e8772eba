"""Search modes, fusion options, filters and keyword/vector consistency, in process."""

from __future__ import annotations

from pocketmcp.documents import NewDoc, delete_documents, upsert_documents
from pocketmcp.search import Filter, search
from pocketmcp.service import Service


async def _add(service: Service, *docs: tuple[str, str]) -> dict[str, int]:
    results = await upsert_documents(service, [NewDoc(text=t, external_id=e) for e, t in docs])
    return {r.external_id: r.doc_id for r in results}


async def test_keyword_mode_needs_the_words_and_vector_mode_needs_the_meaning(
    service: Service
) -> None:
    ids = await _add(service,
                     ("cars", "Automobiles need their oil changed every ten thousand km."),
                     ("code", "The function zxq_parse_header returns a dictionary."),
                     ("tea", "Green tea is steeped in water below boiling."))
    keyword = await search(service, "zxq_parse_header", mode="keyword")
    assert [m.doc_id for m in keyword] == [ids["code"]]
    assert keyword[0].keyword_score is not None and keyword[0].vector_score is None
    # No shared word with "Automobiles ... oil": only meaning can find it.
    assert await search(service, "vehicle engine maintenance", mode="keyword") == []
    vector = await search(service, "vehicle engine maintenance", mode="vector", top_k=1)
    assert [m.doc_id for m in vector] == [ids["cars"]]
    hybrid = await search(service, "zxq_parse_header", mode="hybrid", top_k=3)
    assert hybrid[0].doc_id == ids["code"]
    assert hybrid[0].keyword_score is not None and hybrid[0].vector_score is not None


async def test_keyword_results_follow_updates_and_deletes(service: Service) -> None:
    ids = await _add(service, ("n", "The quarterly report mentions flamingos."))
    assert [m.doc_id for m in await search(service, "flamingos", mode="keyword")] == [ids["n"]]
    await _add(service, ("n", "The quarterly report now mentions pelicans."))
    assert await search(service, "flamingos", mode="keyword") == []
    assert [m.doc_id for m in await search(service, "pelicans", mode="keyword")] == [ids["n"]]
    # Whole-document keyword search (one match per document) follows too.
    assert [m.doc_id for m in await search(service, "pelicans", mode="keyword",
                                           unique_docs=True)] == [ids["n"]]
    assert await search(service, "flamingos", mode="keyword", unique_docs=True) == []
    await delete_documents(service, None, ["n"])
    assert await search(service, "pelicans", mode="keyword") == []
    assert await search(service, "pelicans", mode="keyword", unique_docs=True) == []
    assert await search(service, "pelicans", mode="vector") == []


async def test_a_filter_still_returns_k_results_when_k_exist(service: Service) -> None:
    many = [(f"noise{i}", f"Noise note {i} about rocket launches and orbital mechanics.")
            for i in range(40)]
    paragraphs = "\n\n".join(f"Paragraph {i}: recipes for soup number {i}, with leeks." * 6
                             for i in range(24))
    ids = await _add(service, *many, ("soup", paragraphs))
    chunk_count = len(await search(service, "soup", mode="keyword", top_k=50,
                                   flt=Filter(doc_ids=(ids["soup"],))))
    assert chunk_count >= 5
    # The query is about rockets: every nearest neighbour is outside the filter, yet k
    # results from the allowed document come back, in every mode that can find them.
    for mode in ("vector", "hybrid"):
        found = await search(service, "rocket launch orbit", mode=mode, top_k=5,
                             flt=Filter(doc_ids=(ids["soup"],)))
        assert len(found) == 5 and {m.doc_id for m in found} == {ids["soup"]}


async def test_whole_document_keywords_find_words_spread_over_chunks(
    service: Service
) -> None:
    # "quasar" and "telescope" never share a chunk, but they share the document.
    filler = " ".join(f"Sentence {i} is filler about nothing in particular." for i in range(24))
    others = [(f"other{i}", f"Note {i} on gardening and cooking. {filler}") for i in range(20)]
    ids = await _add(service, *others,
                     ("spread", f"The quasar was bright. {filler} The telescope was old."),
                     ("quasar-only", f"A quasar is an active galactic nucleus. {filler}"),
                     ("telescope-only", f"The telescope has a large mirror. {filler}"))
    spread = await search(service, "quasar", mode="keyword", flt=Filter(
        doc_ids=(ids["spread"],)), top_k=10)
    assert {m.idx for m in spread} == {0}  # the two words are in different chunks
    found = await search(service, "quasar telescope", mode="keyword", unique_docs=True)
    assert found[0].doc_id == ids["spread"]


async def test_unique_docs_keeps_the_best_chunk_of_each_document(service: Service) -> None:
    long_text = "\n\n".join(f"Section {i}. Volcanoes erupt lava and ash, part {i}." * 8
                            for i in range(6))
    ids = await _add(service, ("volcano", long_text),
                     ("other", "A short note about geysers and volcanic heat."))
    every = await search(service, "volcano eruption", top_k=10)
    assert [m.doc_id for m in every].count(ids["volcano"]) > 1
    unique = await search(service, "volcano eruption", top_k=10, unique_docs=True)
    assert sorted(m.doc_id for m in unique) == sorted(ids.values())


async def test_context_joins_neighbouring_chunks_without_repeating_overlaps(
    service: Service
) -> None:
    text = "\n\n".join(f"Part {i} of the saga tells of dragon number {i} and its hoard." * 5
                       for i in range(8))
    await _add(service, ("saga", text))
    [match] = await search(service, "dragon number 4 hoard", top_k=1, mode="keyword")
    [with_context] = await search(service, "dragon number 4 hoard", top_k=1, mode="keyword",
                                  context=1)
    assert with_context.context is not None
    assert match.text in with_context.context
    assert len(with_context.context) > len(match.text)
    # The context is a contiguous slice of the document.
    assert with_context.context in text


async def test_score_threshold_drops_weak_matches(service: Service) -> None:
    await _add(service, ("a", "Penguins live in the southern hemisphere."),
               ("b", "Compilers translate source code into machine code."))
    strict = await search(service, "penguins", mode="vector", score_threshold=0.4)
    assert len(strict) == 1
