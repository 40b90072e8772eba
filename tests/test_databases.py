"""Separate databases: named SQLite indexes beside the main one, in process and over stdio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from conftest import make_config, running
from mcp_harness import call, mcp_session, tool_error, until

from pocketmcp.databases import (
    create_database,
    delete_document,
    find_similar,
    insert_document,
)
from pocketmcp.errors import InvalidRequest, NotFound, WriterBusyError
from pocketmcp.service import Service
from pocketmcp.store.queries import IndexReader
from pocketmcp.store.writes import IndexWriter

SPACE = "Tardigrades, the water bears, survive the vacuum of space and deep freezing."
BREAD = "A sourdough starter of flour and water leavens rye bread without baker's yeast."
BAD_NAMES = ["../x", "a/b", "x.db", "", "a" * 65, "a b", "..", "caf\u00e9", "a\n", "/abs"]




@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    async with running(make_config(tmp_path, databases_dir=str(tmp_path / "dbs"))) as svc:
        yield svc


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# -- in process -------------------------------------------------------------------------------

def test_databases_dir_defaults_to_a_folder_next_to_the_index(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    assert config.databases_dir == config.sqlite_path.parent / "databases"


async def test_a_database_file_lands_in_databases_dir_and_nowhere_else(
    service: Service, tmp_path: Path
) -> None:
    before = files_under(tmp_path)
    created = await create_database(service, "notes")
    assert created.created is True
    assert Path(created.db_path) == (tmp_path / "dbs" / "notes.db").resolve()
    await insert_document(service, SPACE, db_name="notes")
    new = files_under(tmp_path) - before
    assert "dbs/notes.db" in new
    assert all(name.startswith("dbs/notes.db") for name in new), new


async def test_creating_a_database_again_succeeds_and_says_it_existed(service: Service) -> None:
    first = await create_database(service, "Team_2-a")
    doc = await insert_document(service, SPACE, db_name="Team_2-a")
    again = await create_database(service, "Team_2-a")
    assert (first.created, again.created) == (True, False)
    assert again.db_path == first.db_path
    found = await find_similar(service, "animals in space", db_name="Team_2-a")
    assert [s.doc_id for s in found] == [doc.doc_id]  # creating again kept the contents


async def test_a_64_character_name_is_accepted(service: Service) -> None:
    assert (await create_database(service, "x" * 64)).created


async def test_unsafe_database_names_are_invalid_requests_and_touch_no_file(
    service: Service, tmp_path: Path
) -> None:
    before = files_under(tmp_path)
    for name in BAD_NAMES:
        with pytest.raises(InvalidRequest, match="db_name"):
            await create_database(service, name)
        with pytest.raises(InvalidRequest, match="db_name"):
            await insert_document(service, SPACE, db_name=name)
        with pytest.raises(InvalidRequest, match="db_name"):
            await find_similar(service, "space", db_name=name)
        with pytest.raises(InvalidRequest, match="db_name"):
            await delete_document(service, 1, db_name=name)
    assert files_under(tmp_path) == before
    assert not (tmp_path / "x").exists() and not (tmp_path / "dbs").exists()


async def test_a_database_never_created_is_not_found_with_a_hint(
    service: Service, tmp_path: Path
) -> None:
    with pytest.raises(NotFound, match="create_database"):
        await insert_document(service, SPACE, db_name="nope")
    with pytest.raises(NotFound, match="create_database"):
        await find_similar(service, "space", db_name="nope")
    with pytest.raises(NotFound, match="create_database"):
        await delete_document(service, 1, db_name="nope")
    assert not (tmp_path / "dbs" / "nope.db").exists()


async def test_an_unknown_doc_id_is_not_found_in_a_database_and_in_the_main_index(
    service: Service
) -> None:
    await create_database(service, "a")
    with pytest.raises(NotFound, match="doc_id 42"):
        await delete_document(service, 42, db_name="a")
    with pytest.raises(NotFound, match="doc_id 42"):
        await delete_document(service, 42)


async def test_empty_or_oversized_text_is_an_invalid_request(tmp_path: Path) -> None:
    config = make_config(tmp_path, max_file_mb="1")
    big = "word " * (config.max_file_bytes // 5 + 1)
    async with running(config) as service:
        await create_database(service, "a")
        for db in ("a", None):
            for text in ("", "  \n\t "):
                with pytest.raises(InvalidRequest, match="empty"):
                    await insert_document(service, text, db_name=db)
                with pytest.raises(InvalidRequest, match="empty"):
                    await find_similar(service, text, db_name=db)
            with pytest.raises(InvalidRequest, match="MAX_FILE_MB"):
                await insert_document(service, big, db_name=db)
            with pytest.raises(InvalidRequest, match="MAX_FILE_MB"):
                await find_similar(service, big, db_name=db)
            with pytest.raises(InvalidRequest, match="top_k"):
                await find_similar(service, "space", top_k=101, db_name=db)


async def test_scores_are_cosine_similarities_best_first(service: Service) -> None:
    await create_database(service, "a")
    for text in (SPACE, BREAD, "Kubernetes gives each Service a stable virtual IP address."):
        await insert_document(service, text, metadata={"k": 1}, db_name="a")
    found = await find_similar(service, "animals that survive in outer space", db_name="a")
    assert len(found) == 3 and found[0].text == SPACE
    assert [s.score for s in found] == sorted((s.score for s in found), reverse=True)
    assert service.engine is not None
    query = service.engine.embedder.embed_query("animals that survive in outer space")
    reader = IndexReader(service.databases.path("a"))
    try:
        ids, _, vectors = reader.vectors_by_ids([s.chunk_id for s in found],
                                                service.engine.spec.dim)
    finally:
        reader.close()
    cosine = dict(zip(ids.tolist(), (vectors @ query).tolist(), strict=True))
    for s in found:
        assert s.score == pytest.approx(cosine[s.chunk_id], abs=1e-4)
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-4)


async def test_documents_stay_in_their_own_database(service: Service) -> None:
    await create_database(service, "a")
    await create_database(service, "b")
    in_a = await insert_document(service, SPACE, db_name="a")
    await insert_document(service, BREAD)  # the main index
    assert [s.doc_id for s in await find_similar(service, "space animals", db_name="a")] == [
        in_a.doc_id]
    assert await find_similar(service, "space animals", db_name="b") == []
    assert [s.text for s in await find_similar(service, "space animals")] == [BREAD]
    assert await delete_document(service, in_a.doc_id, db_name="a") == in_a.chunk_count
    assert await find_similar(service, "space animals", db_name="a") == []
    assert [s.text for s in await find_similar(service, "bread")] == [BREAD]


async def test_concurrent_inserts_into_one_database_all_land(service: Service) -> None:
    await create_database(service, "a")
    results: list[Any] = []

    async def insert(i: int) -> None:
        results.append(await insert_document(service, f"Note {i}: {SPACE}", db_name="a"))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(insert, i, name=f"test.insert.{i}")
    assert len({r.doc_id for r in results}) == 8
    found = await find_similar(service, "water bears", top_k=100, db_name="a")
    assert {s.doc_id for s in found} == {r.doc_id for r in results}


async def test_a_database_another_process_writes_is_readable_but_not_writable(
    tmp_path: Path
) -> None:
    config = make_config(tmp_path)
    async with running(config) as holder:
        assert holder.engine is not None
        spec = holder.engine.spec
        await create_database(holder, "shared")
        doc = await insert_document(holder, SPACE, db_name="shared")
        async with running(config) as other:  # the same files, another writer lock holder
            again = await create_database(other, "shared")
            assert again.created is False
            found = await find_similar(other, "space animals", db_name="shared")
            assert [s.doc_id for s in found] == [doc.doc_id]
            with pytest.raises(WriterBusyError, match="writer lock"):
                await insert_document(other, BREAD, db_name="shared")
            with pytest.raises(WriterBusyError, match="writer lock"):
                await delete_document(other, doc.doc_id, db_name="shared")
            holder.databases.close()  # its writers close and their locks go: other takes over
            assert await delete_document(other, doc.doc_id, db_name="shared") >= 1
    # Closing the services released every database's lock.
    IndexWriter(config.databases_dir / "shared.db", model_id=spec.model_id, dim=spec.dim).close()


# -- over stdio -------------------------------------------------------------------------------

async def failing(session: Any, code: str, tool: str, args: dict[str, Any]) -> str:
    """A tool call that must fail with `code`. The SDK puts "Error executing tool NAME: "
    before the message our server gives, which starts with the code."""
    error = await tool_error(session, tool, args)
    prefix = f"Error executing tool {tool}: {code}: "
    assert error.startswith(prefix), error
    return error.removeprefix(prefix)


async def test_databases_over_stdio_create_insert_find_delete_and_scope(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    async with mcp_session(tmp_path) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"create_database", "insert_document", "find_similar_documents",
                "delete_document"} <= set(tools)
        assert tools["find_similar_documents"].annotations.read_only_hint is True
        await until(lambda: call(session, "status"), lambda s: s["phase"] == "ready")

        a = await call(session, "create_database", {"db_name": "A"})
        assert a["success"] is True and a["created"] is True
        assert Path(a["db_path"]) == (tmp_path / "data" / "databases" / "A.db").resolve()
        again = await call(session, "create_database", {"db_name": "A"})
        assert (again["success"], again["created"], again["db_path"]) == (
            True, False, a["db_path"])
        await call(session, "create_database", {"db_name": "B"})

        inserted = await call(session, "insert_document", {
            "text": SPACE, "metadata": {"topic": "biology"}, "db_name": "A"})
        assert inserted["chunk_count"] >= 1
        await call(session, "insert_document", {"text": BREAD})  # the main index

        found = await call(session, "find_similar_documents",
                           {"text": "animals surviving in space", "db_name": "A"})
        top = found["results"][0]
        assert (top["doc_id"], top["text"]) == (inserted["doc_id"], SPACE)
        assert 0 < top["score"] <= 1.0 + 1e-6
        assert set(top) == {"chunk_id", "doc_id", "text", "score"}
        # Scoping: A's document is in neither B nor the main index, main's is not in A.
        in_b = await call(session, "find_similar_documents",
                          {"text": "animals surviving in space", "db_name": "B"})
        assert in_b["results"] == []
        in_main = await call(session, "find_similar_documents",
                             {"text": "animals surviving in space", "top_k": 100})
        assert [r["text"] for r in in_main["results"]] == [BREAD]
        bread_in_a = await call(session, "find_similar_documents",
                                {"text": "sourdough bread", "top_k": 100, "db_name": "A"})
        assert [r["text"] for r in bread_in_a["results"]] == [SPACE]

        deleted = await call(session, "delete_document",
                             {"doc_id": inserted["doc_id"], "db_name": "A"})
        assert deleted["deleted_chunks"] == inserted["chunk_count"]
        after = await call(session, "find_similar_documents",
                           {"text": "animals surviving in space", "db_name": "A"})
        assert after["results"] == []

        # Errors are tool errors whose message starts with the code (after the SDK's prefix).
        for name in ["../x", "a/b", "x.db", "", "a" * 65]:
            await failing(session, "INVALID_REQUEST", "create_database", {"db_name": name})
            await failing(session, "INVALID_REQUEST", "insert_document",
                          {"text": SPACE, "db_name": name})
        error = await failing(session, "NOT_FOUND", "insert_document",
                              {"text": SPACE, "db_name": "zz"})
        assert "create_database" in error
        await failing(session, "NOT_FOUND", "find_similar_documents",
                      {"text": "space", "db_name": "zz"})
        await failing(session, "NOT_FOUND", "delete_document",
                      {"doc_id": inserted["doc_id"], "db_name": "A"})
        await failing(session, "NOT_FOUND", "delete_document", {"doc_id": 999})
        await failing(session, "INVALID_REQUEST", "insert_document",
                      {"text": "  ", "db_name": "A"})
        await failing(session, "INVALID_REQUEST", "find_similar_documents", {"text": ""})

    databases = {p for p in files_under(tmp_path) if not p.startswith(("kb/", "server.err"))
                 and not p.startswith("data/index.db")}
    assert databases and all(p.startswith(("data/databases/A.db", "data/databases/B.db"))
                             for p in databases), databases
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "data" / "x").exists()
