"""A small vault of notes, indexed by the real pipeline into either store, filtered and
linked through the tools as a client calls them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs
from support.runtime import fake, make_config, running
from support.tools import Tools, refused
from support.vault import NOW, VAULT, write_vault

from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.ops import documents
from pocketmcp.ops.documents import encode_cursor
from pocketmcp.plans import Plan
from pocketmcp.runtime import Runtime


@pytest.fixture(params=["sqlite", "postgres"])
async def vault(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    """The vault indexed once (no watching afterwards: edits stay unindexed), in a SQLite
    file or in a schema of a real Postgres server."""
    config = make_config(tmp_path, {} if request.param == "sqlite" else {
        "STORE": "postgres", "DATABASE_URL": request.getfixturevalue("pg_url"),
        "PG_SCHEMA": request.getfixturevalue("pg_schema")})
    write_vault(config.watched.root)
    plan = Plan(feed="scan", keep_serving=True)
    with capture_logs() as captured:
        async with running(config, plan, on_event=events.append,
                           embedding=fake(config)) as rt:
            assert rt.pipeline is not None
            with anyio.fail_after(180):
                await rt.pipeline.scan_done.wait()
            logged[:] = captured
            yield rt


events: list[dict[str, Any]] = []
logged: list[dict[str, Any]] = []  # log lines written while the vault was indexed


async def paths(tools: Tools, tool: str = "list_documents", **args: Any) -> list[str]:
    if tool == "search":
        # Off-topic notes must be found too: no score threshold.
        matches = await tools.search("launch", top_k=20, unique_docs=True, score_threshold=0,
                                     **args)
        return sorted(m["path"] for m in matches)
    docs = (await tools("list_documents", **args))["documents"]
    return sorted(d["path"] for d in docs)


async def test_each_filter_returns_exactly_the_expected_notes(vault: Runtime) -> None:
    tools = Tools(vault)
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"tags": ["decision"]}, ["budget.md", "projects/apollo.md"]),
        ({"tags": ["project"]}, ["projects/apollo.md"]),  # project/apollo is below project
        ({"tags": ["#Money", "risk"]}, ["budget.md", "risks.md"]),
        ({"tags_all": ["decision", "money"]}, ["budget.md"]),
        ({"modified_after": "7d"}, ["budget.md"]),
        ({"modified_after": "2024-01-01", "modified_before": "2024-03-05"},
         ["projects/apollo.md"]),
        ({"modified_before": "2021-01-01"}, ["old.md"]),
        ({"created_before": "2024-01-01"}, ["old.md", "risks.md"]),
        ({"created_after": "2024-03-10", "created_before": "2024-03-11"},
         ["journal/2024-03-10.md"]),
        ({"metadata": {"status": "active"}}, ["projects/apollo.md", "risks.md"]),
        ({"metadata": {"status": ["done", "active"], "priority": {"gte": 2}}},
         ["projects/apollo.md"]),
        ({"metadata": {"priority": {"exists": True}}}, ["projects/apollo.md", "risks.md"]),
        ({"path_glob": "journal/**"}, ["journal/2024-03-10.md"]),
        ({"path_glob": "*.md", "tags": ["misc"]}, ["broken.md"]),
    ]
    for flt, expected in cases:
        assert await paths(tools, filter=flt) == expected, flt
        # Search filters inside both retrievers: only allowed notes about a launch are found.
        found = await paths(tools, "search", filter=flt)
        assert set(found) <= set(expected) and found, (flt, found)
        words = await tools.search("launch", top_k=20, mode="keyword", filter=flt,
                                   score_threshold=0)
        assert {m["path"] for m in words} <= set(expected), (flt, words)


async def test_results_carry_dates_tags_and_freshness(vault: Runtime) -> None:
    tools = Tools(vault)
    [match] = await tools.search("Friday launch window", top_k=1,
                                 filter={"path_glob": "projects/*"})
    assert match["title"] == "Apollo launch plan"
    assert match["tags"] == ["project/apollo", "decision"]
    assert match["modified_at"] == "2024-03-01" and match["created"] == "2024-01-10"
    assert match["indexed_at"].startswith(str(NOW.year)) and match["stale"] is False
    docs = {d["path"]: d for d in (await tools("list_documents"))["documents"]}
    old = docs["old.md"]
    assert old["modified_at"] == "2020-05-01T00:00:00.000Z" == old["created"]
    assert docs["projects/apollo.md"]["metadata"]["status"] == "active"  # front matter
    # The malformed block is reported with its path, and the note indexed whole.
    assert docs["broken.md"]["title"] == "Broken" and docs["broken.md"]["tags"] == ["misc"]
    assert any(e.get("path") == "broken.md" for e in events if e["event"] == "inserted")
    [skipped] = [e for e in logged if e["event"] == "front_matter_skipped"]
    assert skipped["path"] == "broken.md" and "not valid YAML" in skipped["reason"]
    [zebra] = await tools.search("zebra crossing", top_k=1, mode="keyword")
    assert zebra["path"] == "broken.md"


async def test_an_edited_file_not_yet_reindexed_shows_stale(vault: Runtime) -> None:
    tools = Tools(vault)
    path = vault.config.watched.root / "old.md"
    path.write_text("# Old\n\nRewritten: launch checklists are now digital.\n")
    [match] = await tools.search("launch checklists", top_k=1, filter={"path_glob": "old.md"})
    assert match["stale"] is True
    doc = await tools("get_document", doc_id=match["doc_id"])
    assert doc["stale"] is True
    listed = {d["path"]: d["stale"] for d in (await tools("list_documents"))["documents"]}
    assert listed["old.md"] is True and listed["budget.md"] is False
    path.unlink()  # gone from disk, still in the index
    [match] = await tools.search("launch checklists", top_k=1, filter={"path_glob": "old.md"})
    assert match["stale"] is True


async def test_list_documents_sorted_by_last_change_pages_newest_first(vault: Runtime) -> None:
    tools = Tools(vault)
    seen: list[str] = []
    cursor = None
    while True:
        page = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        result = await tools("list_documents", sort="modified", page=page)
        seen += [d["modified_at"] for d in result["documents"]]
        cursor = result["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(VAULT) and seen == sorted(seen, reverse=True)
    first = (await tools("list_documents", sort="modified", page={"limit": 1}))["documents"]
    assert first[0]["path"] == "budget.md"


async def test_list_documents_sorted_by_path_pages_in_path_order(vault: Runtime) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        result = await documents.list_documents(vault.read_index, 2, cursor, sort="path")
        seen += [d.path or "" for d in result.documents]
        cursor = result.next_cursor
        if cursor is None:
            break
    assert len(seen) == len(VAULT) and seen == sorted(seen)
    with pytest.raises(InvalidRequest, match="cursor"):
        await documents.list_documents(vault.read_index, 2, encode_cursor(1), sort="path")


async def test_the_web_page_gets_a_documents_chunks_and_its_file(vault: Runtime) -> None:
    read = await vault.read_index()
    listed = await documents.list_documents(vault.read_index, 50, None, sort="path")
    doc = next(d for d in listed.documents if d.path == "budget.md")
    parts = await documents.chunks(read, doc.doc_id)
    assert [c.idx for c in parts] == list(range(doc.chunk_count))
    assert all(c.start_off < c.end_off and c.text for c in parts)
    assert documents.original_file(read, doc) == (vault.config.watched.root / "budget.md").resolve()
    with pytest.raises(NotFound):
        await documents.chunks(read, 10**6)
    with pytest.raises(NotFound, match="gone"):
        documents.original_file(read, doc.model_copy(update={"path": "../outside.md"}))


async def test_links_show_where_a_note_points_and_who_points_at_it(vault: Runtime) -> None:
    tools = Tools(vault)
    docs = {d["path"]: d["doc_id"] for d in (await tools("list_documents"))["documents"]}
    apollo = await tools("links", doc_id=docs["projects/apollo.md"])
    assert [(o["target"], [d["path"] for d in o["documents"]]) for o in apollo["outgoing"]] == [
        ("Budget", ["budget.md"]), ("../risks.md", ["risks.md"])]
    # By file name and by alias, from the journal.
    assert [d["path"] for d in apollo["incoming"]] == ["journal/2024-03-10.md"]
    journal = await tools("links", doc_id=docs["journal/2024-03-10.md"])
    assert [(o["target"], len(o["documents"])) for o in journal["outgoing"]] == [
        ("Moonshot", 1), ("Apollo", 1), ("Nowhere", 0)]
    budget = await tools("links", doc_id=docs["budget.md"])
    assert budget["outgoing"] == [] and [d["path"] for d in budget["incoming"]] == [
        "projects/apollo.md"]


@pytest.mark.parametrize("flt, message", [
    ({"modified_after": "last week"}, "modified_after"),
    ({"tags": ["has space"]}, "no tag"),
    ({"metadata": {"a\"b": 1}}, "quotes"),
    ({"metadata": {"priority": {}}}, "empty range"),
])
async def test_bad_filters_are_clear_errors(tmp_path: Path, flt: dict[str, Any],
                                            message: str) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        for call in ("search", "list_documents"):
            args = {"query": "x"} if call == "search" else {}
            with refused(InvalidRequest, match=message):
                await tools(call, filter=flt, **args)


async def test_a_filter_keeping_few_documents_still_returns_top_k(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        many = [{"text": f"Note {i} about rocket launches and orbits.", "external_id": f"n{i}"}
                for i in range(40)]
        tagged = [{"text": f"Soup recipe {i}: leeks, potatoes and stock. #soup",
                   "external_id": f"s{i}"} for i in range(6)]
        await tools("upsert_documents", docs=many + tagged)
        found = await tools.search("rocket launch orbit", top_k=5, mode="vector",
                                   filter={"tags": ["soup"]}, score_threshold=0)
        assert len(found) == 5 and all(m["tags"] == ["soup"] for m in found)
        assert json.dumps(found)  # plain JSON, as a client receives it
