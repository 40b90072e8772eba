"""Documents given directly: writing, removing, listing and reading them, in process."""

from __future__ import annotations

from support.tools import Tools, refused

from pocketmcp.errors import InvalidRequest, NotFound


async def test_arguments_are_checked_before_anything_is_written(fake_tools: Tools) -> None:
    tools = fake_tools
    with refused(InvalidRequest, match="doc_ids or external_ids"):
        await tools("delete_documents")
    with refused(InvalidRequest, match=r"9223372036854775807"):
        await tools("delete_documents", doc_ids=[2**63])
    with refused(InvalidRequest, match="reserved"):
        await tools("upsert_documents", docs=[{"text": "x", "external_id": "file:a.md"}])
    with refused(InvalidRequest, match="cursor"):
        await tools("list_documents", page={"limit": 2, "cursor": "not-ours"})
    with refused(InvalidRequest, match="metadata filter"):
        await tools("list_documents", metadata={"a\"b": 1})
    assert (await tools("list_documents"))["documents"] == []


async def test_a_page_at_a_time_in_doc_id_order_then_nothing_more(fake_tools: Tools) -> None:
    tools = fake_tools
    ids = await tools.add(*((f"n{i}", f"Note {i} on birds.") for i in range(5)))
    seen, cursor = [], None
    while True:
        page = await tools("list_documents", page={"limit": 2, **(
            {"cursor": cursor} if cursor else {})})
        seen += [d["doc_id"] for d in page["documents"]]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    assert seen == sorted(ids.values())


async def test_a_document_reads_whole_and_an_unknown_one_is_not_found(fake_tools: Tools) -> None:
    tools = fake_tools
    ids = await tools.add(("kite", "# Kites\n\nKites fly on steady wind."))
    doc = await tools("get_document", doc_id=ids["kite"])
    assert (doc["title"], doc["text"]) == ("Kites", "# Kites\n\nKites fly on steady wind.")
    assert doc["source"] == "raw" and doc["path"] is None
    with refused(NotFound, match="doc_id 999"):
        await tools("get_document", doc_id=999)
    libraries = await tools("list_libraries")
    assert libraries["libraries"] == [{"name": "default", "documents": 1, "chunks": 1}]
