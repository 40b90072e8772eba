"""Export and import of an index, and online backups, on real indexes (the fake embedder's
vectors, the real model's where the test needs its name in the export)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.runtime import fake, make_config, running, shared, vector_file_settled
from support.tools import Tools
from support.vault import write_vault

from pocketmcp.commands import archiving
from pocketmcp.config import Config, load
from pocketmcp.embed.base import EmbedderSource
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.errors import InvalidRequest, NotSupported
from pocketmcp.ops import archive
from pocketmcp.plans import Plan
from pocketmcp.runtime import Runtime
from pocketmcp.store.sqlite.queries import SqliteReader


def _config(folder: Path, env: dict[str, str] | None = None) -> Any:
    folder.mkdir(exist_ok=True)
    return make_config(folder, env)


def _embedding(config: Config, model: LocalEmbedder | None) -> EmbedderSource:
    """The run's real model when given, else the fake embedder."""
    return fake(config) if model is None else shared(model, config)


QUERIES = ("launch window", "budget costs", "weather risk", "zebra", "soup with leeks")


async def _snapshot(rt: Runtime) -> dict[str, Any]:
    """What a client sees: searches in every mode, documents and links (ids left out, as a
    new index numbers them anew)."""
    tools = Tools(rt)
    seen: dict[str, Any] = {}
    for query in QUERIES:
        for mode in ("hybrid", "vector", "keyword"):
            seen[f"{mode}:{query}"] = [
                (m["path"], m["title"], m["idx"], m["score"], m["section"], m["tags"],
                 m["modified_at"], m["created"]) for m in await tools.search(query, mode=mode)]
    docs = (await tools("list_documents", page={"limit": 100}))["documents"]
    keep = ("external_id", "title", "path", "library", "metadata", "chunk_count", "tags",
            "modified_at", "created")
    seen["documents"] = sorted(json.dumps({k: d[k] for k in keep}, sort_keys=True)
                               for d in docs)
    links = []
    for d in docs:
        got = await tools("links", doc_id=d["doc_id"])
        links.append((d["external_id"],
                      [(o["target"], [x["title"] for x in o["documents"]])
                       for o in got["outgoing"]],
                      sorted(x["title"] for x in got["incoming"])))
    seen["links"] = sorted(links)
    return seen


async def _source(tmp_path: Path, env: dict[str, str] | None = None,
                  model: LocalEmbedder | None = None) -> tuple[Path, dict[str, Any]]:
    """An index of the vault and of raw documents, exported while its server runs (in a
    SQLite file, or where `env` says; with `model`'s vectors, else the fake embedder's)."""
    config = _config(tmp_path / "a", env)
    write_vault(config.watched.root)
    async with running(config, Plan(feed="scan", keep_serving=True),
                       embedding=_embedding(config, model)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
        await Tools(rt)("upsert_documents", docs=[
            {"text": "---\ntags: [food]\n---\nSoup with leeks and potatoes. [[Budget]]",
             "external_id": "soup", "metadata": {"course": "starter"}}])
        with anyio.fail_after(60):  # keywords come first, vectors follow: all of them here
            while (await Tools(rt)("status"))["chunks_waiting"]:  # noqa: ASYNC110 - no event
                await anyio.sleep(0.05)
        before = await _snapshot(rt)
        exported = await archive.export(config.main_place(), tmp_path / "export.jsonl")
    assert (exported.documents, exported.chunks) == (7, 7)
    return tmp_path / "export.jsonl", before


async def test_export_then_import_gives_identical_results_with_no_embedding(
    tmp_path: Path
) -> None:
    export_file, before = await _source(tmp_path)
    config = _config(tmp_path / "b")
    async with running(config, embedding=fake(config)) as rt:
        calls: list[int] = []
        real = rt.services.embedder.embed_documents

        async def counting(texts: list[str]) -> Any:
            calls.append(len(texts))
            return await real(texts)

        rt.services.embedder.embed_documents = counting  # type: ignore[method-assign]
        result = await archive.import_file(rt.writing, export_file,
                                           identity=rt.services.identity)
        assert (result.documents, result.chunks, result.chunks_embedded) == (7, 7, 0)
        assert calls == []
        assert await _snapshot(rt) == before


async def test_an_imported_index_searched_without_its_folder_marks_no_file_changed(
    tmp_path: Path
) -> None:
    """The export's files are the vault's; an index made by import records no folder, and a
    search with none given compares no file (WATCH_DIR's default, `kb` under the working
    directory, marked every hit changed since indexed), while the folder given compares."""
    export_file, _ = await _source(tmp_path)
    index = tmp_path / "b" / "index.db"
    for given, stale in (({}, None), ({"WATCH_DIR": str(tmp_path / "a" / "kb")}, False)):
        config = load({}, environ={"SQLITE_PATH": str(index), **given})
        async with running(config, embedding=fake(config)) as rt:
            if not given:
                await archive.import_file(rt.writing, export_file,
                                          identity=rt.services.identity)
            matches = await Tools(rt).search("launch window", mode="keyword")
            files = [m for m in matches if m["path"] and not m["path"].startswith("raw")]
            assert files and {m["stale"] for m in files} == {stale}, matches


async def test_a_postgres_index_exports_and_imports_with_identical_results(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    env = {"STORE": "postgres", "DATABASE_URL": pg_url, "PG_SCHEMA": pg_schema}
    export_file, before = await _source(tmp_path, env)
    copy = {**env, "PG_SCHEMA": pg_schema + "_copy"}  # dropped with the test's schema
    config = _config(tmp_path / "b", copy)
    async with running(config, embedding=fake(config)) as rt:
        result = await archive.import_file(rt.writing, export_file, identity=rt.services.identity)
        assert (result.documents, result.chunks, result.chunks_embedded) == (7, 7, 0)
        assert await _snapshot(rt) == before


async def test_an_export_made_with_another_model_is_embedded_again(
        tmp_path: Path, embedder: LocalEmbedder) -> None:
    export_file, _ = await _source(tmp_path, model=embedder)
    lines = export_file.read_text().splitlines()
    header = json.loads(lines[0])
    other = tmp_path / "other.jsonl"
    assert header["embedding"]["provider"] == "local"  # what made the vectors, recorded
    made_by = {**header["embedding"], "model_id": "another/model"}
    other.write_text("\n".join([json.dumps({**header, "model_id": "another/model",
                                            "embedding": made_by}),
                                *lines[1:]]) + "\n")
    config = _config(tmp_path / "b")
    async with running(config, embedding=shared(embedder, config)) as rt:
        result = await archive.import_file(rt.writing, other, identity=rt.services.identity)
        assert not result.same_model and result.chunks_embedded == result.chunks == 7
        [match] = await Tools(rt).search("Friday launch window", top_k=1)
        assert match["path"] == "projects/apollo.md"


async def test_a_cut_short_or_foreign_file_is_refused_with_its_reason(tmp_path: Path) -> None:
    export_file, _ = await _source(tmp_path)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(export_file.read_text().splitlines()[:-1]) + "\n")
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": "world"}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text(export_file.read_text().splitlines()[0] + "\n{not json\n")
    config = _config(tmp_path / "b")
    async with running(config, embedding=fake(config)) as rt:
        for path, message in ((cut, "cut short"), (foreign, "not a PocketMCP export"),
                              (broken, "line 2")):
            with pytest.raises(InvalidRequest, match=message):
                await archive.import_file(rt.writing, path, identity=rt.services.identity)


async def test_a_backup_made_while_the_server_writes_is_consistent(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        await tools.add(("first", "The first note."))
        done = anyio.Event()

        async def keep_writing() -> None:
            for i in range(40):
                await tools.add((f"note{i}", f"Note number {i}.\n\n" + "More text. " * 10 * i))
            done.set()

        copies = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_writing)
            while not done.is_set() and len(copies) < 5:
                target = tmp_path / f"backup{len(copies)}.db"
                await archive.backup(config.main_place(), target)
                copies.append(target)
        db = config.store.sqlite_path
        assert db is not None
        await vector_file_settled(rt)  # its start-up check writes nothing after this
        # Neither the index nor any file of its own (its vector file, its log) is written over.
        for own in (db, Path(f"{db}.vectors"), Path(f"{db}-wal")):
            before = own.stat().st_mtime_ns
            with pytest.raises(InvalidRequest, match="another file than the index's own"):
                await archive.backup(config.main_place(), own)
            with pytest.raises(InvalidRequest, match="another file than the index's own"):
                await archive.export(config.main_place(), own)
            assert own.stat().st_mtime_ns == before
        exported = await archive.export(config.main_place(), tmp_path / "e.jsonl")
    assert copies
    # The copies hold the documents' text: private as the index's files are.
    for path in (*copies, Path(exported.path)):
        assert path.stat().st_mode & 0o777 == 0o600, path
    for copy in copies:
        reader = SqliteReader(copy)
        try:
            docs, chunks = reader.query("SELECT count(*), sum(chunk_count) FROM documents")[0]
            assert docs >= 1
            assert reader.query("SELECT count(*) FROM chunks") == [(chunks,)]
            assert reader.query("SELECT count(*) FROM vec_chunks") == [(chunks,)]
        finally:
            reader.close()


async def test_a_backup_of_a_postgres_index_is_refused_with_pg_dump_named(
    tmp_path: Path
) -> None:
    config = _config(tmp_path, {"STORE": "postgres", "PG_SCHEMA": "team",
                                "DATABASE_URL": "postgresql://pocketmcp@127.0.0.1:1/none"})
    with pytest.raises(NotSupported, match="pg_dump -n team"):
        await archiving.backup(config, argparse.Namespace(file=str(tmp_path / "copy.db"),
                                                          json=False))
    assert not (tmp_path / "copy.db").exists()
