"""The real server, spawned as `python -m pocketmcp`, driven over stdio by the python-sdk;
its stdout carries protocol messages only."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.mcp_harness import call, mcp_session, paths_for, server_env, tool_error, until

pytestmark = pytest.mark.usefixtures("processes")


@asynccontextmanager
async def watched_session(tmp_path: Path) -> AsyncIterator[tuple[ClientSession, list[Any]]]:
    """A session with the server, and what its stdout carried that is no JSON-RPC message
    (each line the client could not parse reaches it as an exception)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp"],
                                   env=server_env(tmp_path), cwd=str(tmp_path))
    strays: list[Any] = []

    async def on_message(item: Any) -> None:
        if isinstance(item, Exception):
            strays.append(item)

    with open(tmp_path / "server.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
            read, write, message_handler=on_message
        ) as session:
            await session.initialize()
            yield session, strays


def save(path: Path, text: str) -> None:
    """Save as editors do: write a temporary file, then rename it over the original."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread; feed it flour and water.\n"
B = "# Kubernetes\n\nA Service gives pods a stable virtual IP address and a DNS name.\n"


async def test_the_seven_acceptance_steps(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    async with watched_session(tmp_path) as (session, strays):
        # 1. Start and ready.
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"search", "upsert_documents", "delete_documents", "list_documents",
                "get_document", "reindex", "status"} <= tools
        status = await until(lambda: call(session, "status"),
                             lambda s: s["initial_indexing_done"])
        assert status["role"] == "writer" and status["documents"] == 0

        # 2. a.md and b.md dropped into the folder get indexed.
        (kb / "a.md").write_text(A)
        (kb / "b.md").write_text(B)
        await until(lambda: call(session, "status"), lambda s: s["documents"] == 2)

        # 3. A term of a.md ranks a.md first.
        assert (await paths_for(session, "sourdough starter"))[0] == "a.md"

        # 4. An edit of a.md is reflected; a save without change is skipped.
        save(kb / "a.md", A + "\nRye flour makes the starter livelier.\n")
        first = await until(lambda: call(session, "search", {"query": "rye flour", "top_k": 1}),
                            lambda r: bool(r["matches"])
                            and "Rye flour" in r["matches"][0]["preview"])
        assert first["matches"][0]["path"] == "a.md"
        # A chunk keeps its row once its vector is written (until then it is found by its
        # keywords, and written again with the vector).
        await until(lambda: call(session, "status"), lambda s: s["chunks_waiting"] == 0)
        first = await call(session, "search", {"query": "rye flour", "top_k": 1})
        save(kb / "a.md", A + "\nRye flour makes the starter livelier.\n")
        (kb / "c.md").write_text("# Marker\n\nA note written after the unchanged save.\n")
        await until(lambda: call(session, "status"), lambda s: s["documents"] == 3)
        again = await call(session, "search", {"query": "rye flour", "top_k": 1})
        assert again["matches"][0]["chunk_id"] == first["matches"][0]["chunk_id"]
        # The same chunk row, never rewritten: the save was skipped, nothing re-embedded.
        events = [json.loads(line) for line in (tmp_path / "server.err").read_text().splitlines()
                  if line.startswith("{")]
        a_writes = [e["event"] for e in events if e.get("path") == "a.md"]
        assert a_writes.count("updated") == 1 and a_writes.count("inserted") == 1

        # 5. Removing b.md removes it from results.
        (kb / "b.md").unlink()
        await until(lambda: paths_for(session, "kubernetes service pods", top_k=10),
                    lambda p: "b.md" not in p)

        # 6. upsert_documents makes raw text searchable at once.
        upserted = await call(session, "upsert_documents", {"docs": [
            {"text": "Tardigrades survive the vacuum of space.", "external_id": "bio-1",
             "title": "Water bears", "metadata": {"topic": "biology"}}]})
        assert upserted["results"][0]["status"] == "inserted"
        found = await call(session, "search", {"query": "animals surviving in space",
                                               "top_k": 1})
        top = found["matches"][0]
        assert top["doc_id"] == upserted["results"][0]["doc_id"]
        assert top["path"] is None and top["title"] == "Water bears"

        # 7. The resource URI of a result returns exactly the stored chunk text.
        content = (await session.read_resource(top["resource"])).contents[0]
        chunk = json.loads(content.text)
        assert chunk["text"] == "Tardigrades survive the vacuum of space."
        assert (chunk["start_off"], chunk["end_off"]) == (top["start_off"], top["end_off"])
        whole = await call(session, "get_document", {"doc_id": top["doc_id"]})
        assert whole["text"][chunk["start_off"]:chunk["end_off"]] == chunk["text"]
        assert whole["metadata"] == {"topic": "biology"}
        assert strays == []  # every line on stdout was a protocol message


async def test_documents_can_be_listed_page_by_page_updated_and_deleted(tmp_path: Path) -> None:
    async with mcp_session(tmp_path) as session:
        docs = [{"text": f"Note number {i} about the colour {c}.", "external_id": f"n{i}"}
                for i, c in enumerate(["red", "green", "blue", "amber", "violet"])]
        result = await call(session, "upsert_documents", {"docs": docs})
        assert [r["status"] for r in result["results"]] == ["inserted"] * 5
        same = await call(session, "upsert_documents", {"docs": docs[:1]})
        assert same["results"][0]["status"] == "unchanged"
        changed = await call(session, "upsert_documents", {"docs": [
            {"text": "Note zero now speaks of teal.", "external_id": "n0"}]})
        assert changed["results"][0]["status"] == "updated"

        seen, cursor = [], None
        while True:
            page = await call(session, "list_documents",
                              {"page": {"limit": 2, **({"cursor": cursor} if cursor else {})}})
            seen += [d["external_id"] for d in page["documents"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        assert seen == ["n0", "n1", "n2", "n3", "n4"]

        gone = await call(session, "delete_documents",
                          {"external_ids": ["n1", "nope"], "doc_ids": [result["results"][2]
                                                                       ["doc_id"]]})
        assert len(gone["deleted_doc_ids"]) == 2 and gone["deleted_chunks"] == 2
        assert gone["not_found"] == ["nope"]
        remaining = await call(session, "list_documents")
        assert [d["external_id"] for d in remaining["documents"]] == ["n0", "n3", "n4"]
        message = await tool_error(session, "get_document", {"doc_id": 999})
        assert "no document with doc_id 999" in message


async def test_bad_requests_get_tool_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    async with mcp_session(tmp_path) as session:
        assert "valid string" in await tool_error(session, "search", {"query": 5})
        assert "top_k" in await tool_error(session, "search", {"query": "x", "top_k": 500})
        assert "query" in await tool_error(session, "search", {})
        assert "docs" in await tool_error(session, "upsert_documents", {"docs": []})
        reserved = await tool_error(session, "upsert_documents", {
            "docs": [{"text": "x", "external_id": "file:evil.md"}]})
        assert "reserved" in reserved
        assert "cursor" in await tool_error(session, "list_documents",
                                            {"page": {"cursor": "garbage"}})
        assert "doc_ids or external_ids" in await tool_error(session, "delete_documents", {})
        # Still serving.
        status = await call(session, "status")
        assert status["last_error"] is None


async def test_search_filters_by_document_and_path_and_threshold(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    (kb / "notes").mkdir(parents=True)
    (kb / "notes" / "bread.md").write_text(A)
    (kb / "infra.md").write_text(B)
    async with mcp_session(tmp_path) as session:
        # Keywords come first, vectors after: a match by meaning alone (no shared word)
        # needs the vectors, so wait until no chunk waits for its vector.
        await until(lambda: call(session, "status"),
                    lambda s: s["initial_indexing_done"] and s["chunks_waiting"] == 0)
        only_notes = await call(session, "search", {
            "query": "kubernetes", "filter": {"path_glob": "notes/**"}, "score_threshold": 0})
        assert [m["path"] for m in only_notes["matches"]] == ["notes/bread.md"]
        everything = await call(session, "search", {"query": "kubernetes"})
        infra_id = next(m["doc_id"] for m in everything["matches"] if m["path"] == "infra.md")
        by_id = await call(session, "search", {"query": "bread", "score_threshold": 0,
                                               "filter": {"doc_ids": [infra_id]}})
        assert {m["doc_id"] for m in by_id["matches"]} == {infra_id}
        strict = await call(session, "search", {"query": "kubernetes service",
                                                "mode": "vector", "score_threshold": 0.3})
        assert [m["path"] for m in strict["matches"]] == ["infra.md"]


async def test_reindex_reports_changes_and_refuses_a_second_run(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text(A)
    async with mcp_session(tmp_path) as session:
        await until(lambda: call(session, "status"), lambda s: s["initial_indexing_done"])
        progress: list[tuple[float, float | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total))

        result = await session.call_tool("reindex", {"force": True},
                                         progress_callback=on_progress)
        assert not result.is_error
        body = result.structured_content
        # Read again by force with the same text: unchanged to the reader, as `index` counts it.
        assert body["files_unchanged"] == 1 and body["files_updated"] == 0
        assert body["chunks_total"] == 1
        assert progress, "no progress notification arrived"
        nothing = await call(session, "reindex")
        assert nothing["files_unchanged"] == 1 and nothing["files_updated"] == 0
