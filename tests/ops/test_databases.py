"""Separate databases: named indexes beside the main one (SQLite files, or Postgres schemas
beside the main one's), in process and over stdio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from support.mcp_harness import call, mcp_session, tool_error, until
from support.runtime import fake, make_config, running
from support.tools import Tools, refused, refused_by_schema

from pocketmcp.config import Config
from pocketmcp.core.identity import Identity
from pocketmcp.errors import InvalidRequest, ModelMismatchError, NotFound, ReadOnly

SPACE = "Tardigrades, the water bears, survive the vacuum of space and deep freezing."
BREAD = "A sourdough starter of flour and water leavens rye bread without baker's yeast."
BAD_NAMES = ["../x", "a/b", "x.db", "", "a" * 65, "a b", "..", "caf\u00e9", "a\n", "/abs"]
SQLITE_ONLY = pytest.mark.parametrize("tools", ["sqlite"], indirect=True)


@pytest.fixture(params=["sqlite", "postgres"])
async def tools(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tools]:
    """A running server with its main index and named databases in SQLite files, or in
    schemas of a real Postgres server."""
    env = {} if request.param == "sqlite" else {
        "STORE": "postgres", "DATABASE_URL": request.getfixturevalue("pg_url"),
        "PG_SCHEMA": request.getfixturevalue("pg_schema")}
    config = make_config(tmp_path, env)
    async with running(config, embedding=fake(config)) as rt:
        yield Tools(rt)


def make_with_model(config: Config, name: str, identity: Identity) -> None:
    """Database `name` made by another process with `identity`'s model."""
    config.main_place().database(name).writer(identity).close()


async def similar(tools: Tools, text: str, **args: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await tools("find_similar_documents", text=text,
                                               **args))["results"]
    return found


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# -- in process -------------------------------------------------------------------------------

def test_databases_are_in_a_folder_next_to_the_index(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"DATABASES_DIR": str(tmp_path / "dbs")})  # not read
    named = Path(config.main_place().database("x").describe())
    assert named == (config.store.sqlite_path.parent / "databases" / "x.db").resolve()


@SQLITE_ONLY
async def test_a_database_file_lands_in_the_databases_folder_and_nowhere_else(
    tools: Tools, tmp_path: Path
) -> None:
    before = files_under(tmp_path)
    created = await tools("create_database", db_name="notes")
    assert created["created"] is True
    assert Path(created["db_path"]) == (tmp_path / "data" / "databases" / "notes.db").resolve()
    await tools("insert_document", text=SPACE, db_name="notes")
    new = files_under(tmp_path) - before
    assert "data/databases/notes.db" in new
    assert all(name.startswith("data/databases/notes.db") for name in new), new


async def test_creating_a_database_again_succeeds_and_says_it_existed(tools: Tools) -> None:
    first = await tools("create_database", db_name="Team_2-a")
    doc = await tools("insert_document", text=SPACE, db_name="Team_2-a")
    again = await tools("create_database", db_name="Team_2-a")
    assert (first["created"], again["created"]) == (True, False)
    assert again["db_path"] == first["db_path"]
    found = await similar(tools, "animals in space", db_name="Team_2-a")
    assert [s["doc_id"] for s in found] == [doc["doc_id"]]  # creating again kept the contents


async def test_a_64_character_name_is_accepted(tools: Tools) -> None:
    assert (await tools("create_database", db_name="x" * 64))["created"]


async def test_unsafe_database_names_are_invalid_requests_and_touch_no_file(
    tools: Tools, tmp_path: Path
) -> None:
    before = files_under(tmp_path)
    for name in BAD_NAMES:
        with refused(InvalidRequest, match="db_name"):
            await tools("create_database", db_name=name)
        with refused(InvalidRequest, match="db_name"):
            await tools("insert_document", text=SPACE, db_name=name)
        with refused(InvalidRequest, match="db_name"):
            await similar(tools, "space", db_name=name)
        with refused(InvalidRequest, match="db_name"):
            await tools("delete_document", doc_id=1, db_name=name)
    assert files_under(tmp_path) == before
    assert not (tmp_path / "x").exists() and not (tmp_path / "dbs").exists()


async def test_a_database_never_created_is_not_found_with_a_hint(
    tools: Tools, tmp_path: Path
) -> None:
    with refused(NotFound, match="create_database"):
        await tools("insert_document", text=SPACE, db_name="nope")
    with refused(NotFound, match="create_database"):
        await similar(tools, "space", db_name="nope")
    with refused(NotFound, match="create_database"):
        await tools("delete_document", doc_id=1, db_name="nope")
    assert not (tmp_path / "dbs" / "nope.db").exists()
    assert not tools.rt.place.database("nope").exists()


async def test_an_unknown_doc_id_is_not_found_in_a_database_and_in_the_main_index(
    tools: Tools
) -> None:
    await tools("create_database", db_name="a")
    with refused(NotFound, match="doc_id 42"):
        await tools("delete_document", doc_id=42, db_name="a")
    with refused(NotFound, match="doc_id 42"):
        await tools("delete_document", doc_id=42)


async def test_empty_or_oversized_text_is_an_invalid_request(tmp_path: Path) -> None:
    config = make_config(tmp_path, max_file_mb="1")
    big = "word " * (config.pipeline.max_file_bytes // 5 + 1)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        await tools("create_database", db_name="a")
        for db in ("a", None):
            for text in ("", "  \n\t "):
                with refused(InvalidRequest, match="empty"):
                    await tools("insert_document", text=text, db_name=db)
                with refused(InvalidRequest, match="empty"):
                    await similar(tools, text, db_name=db)
            with refused(InvalidRequest, match="MAX_FILE_MB"):
                await tools("insert_document", text=big, db_name=db)
            with refused(InvalidRequest, match="MAX_FILE_MB"):
                await similar(tools, big, db_name=db)
            with refused_by_schema("top_k"):  # refused by the tool's schema
                await similar(tools, "space", top_k=101, db_name=db)


async def test_scores_are_cosine_similarities_best_first(tools: Tools) -> None:
    await tools("create_database", db_name="a")
    for text in (SPACE, BREAD, "Kubernetes gives each Service a stable virtual IP address."):
        await tools("insert_document", text=text, metadata={"k": 1}, db_name="a")
    found = await similar(tools, "animals that survive in outer space", db_name="a")
    assert len(found) == 3 and found[0]["text"] == SPACE
    assert [s["score"] for s in found] == sorted((s["score"] for s in found), reverse=True)
    reading = await tools.rt.reading("a")
    query = await reading.embedder.embed_query("animals that survive in outer space")
    ids, _, vectors = await reading.index.run(
        lambda r: r.vectors_by_ids([s["chunk_id"] for s in found], reading.index.dim))
    cosine = dict(zip(ids.tolist(), (vectors @ query).tolist(), strict=True))
    for s in found:
        assert s["score"] == pytest.approx(cosine[s["chunk_id"]], abs=1e-4)
    assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-4)


async def test_documents_stay_in_their_own_database(tools: Tools) -> None:
    await tools("create_database", db_name="a")
    await tools("create_database", db_name="b")
    in_a = await tools("insert_document", text=SPACE, db_name="a")
    await tools("insert_document", text=BREAD)  # the main index
    assert [s["doc_id"] for s in await similar(tools, "space animals", db_name="a")] == [
        in_a["doc_id"]]
    assert await similar(tools, "space animals", db_name="b") == []
    assert [s["text"] for s in await similar(tools, "space animals")] == [BREAD]
    deleted = await tools("delete_document", doc_id=in_a["doc_id"], db_name="a")
    assert deleted["deleted_chunks"] == in_a["chunk_count"]
    assert await similar(tools, "space animals", db_name="a") == []
    assert [s["text"] for s in await similar(tools, "bread")] == [BREAD]


async def test_concurrent_inserts_into_one_database_all_land(tools: Tools) -> None:
    await tools("create_database", db_name="a")
    results: list[Any] = []

    async def insert(i: int) -> None:
        results.append(await tools("insert_document", text=f"Note {i}: {SPACE}", db_name="a"))

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(insert, i, name=f"test.insert.{i}")
    assert len({r["doc_id"] for r in results}) == 8
    found = await similar(tools, "water bears", top_k=100, db_name="a")
    assert {s["doc_id"] for s in found} == {r["doc_id"] for r in results}


async def test_a_database_another_process_writes_is_readable_but_not_writable(
    tmp_path: Path
) -> None:
    config = make_config(tmp_path)
    held, release, released = anyio.Event(), anyio.Event(), anyio.Event()
    shared: dict[str, Any] = {}

    async def hold() -> None:  # another process, in effect: it holds the database's lock
        async with running(config, embedding=fake(config)) as holder:
            shared["identity"] = holder.services.identity
            mine = Tools(holder)
            await mine("create_database", db_name="shared")
            shared["doc"] = await mine("insert_document", text=SPACE, db_name="shared")
            held.set()
            await release.wait()
        released.set()  # its writers closed, their locks went

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await held.wait()
        doc, identity = shared["doc"], shared["identity"]
        async with running(config, embedding=fake(config)) as other_rt:  # the same files
            other = Tools(other_rt)
            again = await other("create_database", db_name="shared")
            assert again["created"] is False
            found = await similar(other, "space animals", db_name="shared")
            assert [s["doc_id"] for s in found] == [doc["doc_id"]]
            with refused(ReadOnly, match="writer lock"):
                await other("insert_document", text=BREAD, db_name="shared")
            with refused(ReadOnly, match="writer lock"):
                await other("delete_document", doc_id=doc["doc_id"], db_name="shared")
            release.set()
            await released.wait()
            deleted = await other("delete_document", doc_id=doc["doc_id"], db_name="shared")
            assert deleted["deleted_chunks"] >= 1
    # Closing the runtimes released every database's lock.
    config.main_place().database("shared").writer(identity).close()


async def test_a_database_made_with_another_model_is_refused_clearly(tools: Tools) -> None:
    make_with_model(tools.rt.config, "old", Identity(model="another/model", dim=384))
    with refused(ModelMismatchError, match="built with local 'another/model'"):
        await similar(tools, "space", db_name="old")
    with refused(ModelMismatchError, match="built with local 'another/model'"):
        await tools("insert_document", text=SPACE, db_name="old")


@pytest.mark.parametrize("tools", ["postgres"], indirect=True)
async def test_on_postgres_each_database_is_a_schema_named_as_written(tools: Tools) -> None:
    main = tools.rt.config.store.pg_schema
    names = ["Notes", "notes", "a-b", "a_b", "x" * 63 + "a", "x" * 63 + "b"]
    made = {name: (await tools("create_database", db_name=name))["db_path"] for name in names}
    assert made["Notes"] == f"postgres schema {main}_db_Notes"
    assert len(set(made.values())) == len(names)  # case, '-' and long names stay apart
    assert all(len(where.removeprefix("postgres schema ")) <= 63 for where in made.values())
    for name in names:
        await tools("insert_document", text=f"{name}: {SPACE}", db_name=name)
    for name in names:
        found = await similar(tools, "water bears", top_k=100, db_name=name)
        assert [s["text"] for s in found] == [f"{name}: {SPACE}"]


@pytest.mark.parametrize("tools", ["postgres"], indirect=True)
async def test_two_processes_write_one_postgres_database(tools: Tools) -> None:
    await tools("create_database", db_name="shared")
    first = await tools("insert_document", text=SPACE, db_name="shared")
    config = tools.rt.config
    async with running(config, embedding=fake(config)) as other_rt:  # another process, one server
        other = Tools(other_rt)
        assert (await other("create_database", db_name="shared"))["created"] is False
        second = await other("insert_document", text=BREAD, db_name="shared")
        seen_there = await similar(other, "water", top_k=10, db_name="shared")
    seen_here = await similar(tools, "water", top_k=10, db_name="shared")
    both = {first["doc_id"], second["doc_id"]}
    assert len(both) == 2
    assert {s["doc_id"] for s in seen_here} == {s["doc_id"] for s in seen_there} == both


# -- over stdio -------------------------------------------------------------------------------

async def failing(session: Any, code: str, tool: str, args: dict[str, Any]) -> str:
    """A tool call that must fail with `code`. The SDK puts "Error executing tool NAME: "
    before the message our server gives, which starts with the code."""
    error = await tool_error(session, tool, args)
    prefix = f"Error executing tool {tool}: {code}: "
    assert error.startswith(prefix), error
    return error.removeprefix(prefix)


@pytest.mark.usefixtures("processes")
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
