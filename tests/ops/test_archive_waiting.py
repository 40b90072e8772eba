"""Export and import of an index whose chunks wait for their vectors (written for keyword
search while the provider was down), over both stores: the waiting chunks are exported
without vectors, imported as waiting (found by their keywords at once) and embedded when the
provider returns; the end line counts them, and a file whose count does not match is refused
whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support.fake_embedder import FakeEmbedder
from support.mcp_harness import until
from support.pg_server import drop_schemas, new_schema
from support.provider_server import Fault, ProviderServer, provider_server
from support.runtime import provider_embedding, remote_config, running
from support.tools import Tools

from pocketmcp.config import Config
from pocketmcp.embed import remote
from pocketmcp.errors import InvalidRequest
from pocketmcp.ops import archive
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime

NOTES = {"lighthouse.md": "# Lighthouse\n\nThe lighthouse keeper climbs the spiral stairs.\n",
         "sourdough.md": "# Sourdough\n\nThe sourdough starter bubbles on the windowsill.\n",
         "glacier.md": "# Glacier\n\nThe glacier calves into the fjord each spring.\n"}


def _back_soon(patch: pytest.MonkeyPatch) -> None:
    """A provider back from failing is tried again within 0.2 s, not after the doubling wait
    (up to a minute) meant for a real outage; indexing gives way to the tests' searches at
    most 10 ms a step (GIVE_WAY_S): these tests wait on both."""
    patch.setattr(remote, "MAX_DOWN_S", 0.2)
    patch.setattr(Precedence.give_way, "__defaults__", (0.01,))


@pytest.fixture(autouse=True)
def back_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    _back_soon(monkeypatch)


def _config(folder: Path, server: ProviderServer, env: dict[str, str], copy: bool) -> Config:
    folder.mkdir(exist_ok=True)
    if copy and env:  # another schema, dropped with the export's
        env = {**env, "PG_SCHEMA": f"{env['PG_SCHEMA']}_{folder.parent.name[-8:]}"}
    return remote_config(folder, server, env)


async def _waiting(rt: Runtime) -> int:
    return int((await Tools(rt)("status"))["chunks_waiting"])


async def _paths(rt: Runtime, query: str, mode: str = "keyword") -> list[str]:
    return [m["path"] for m in await Tools(rt).search(query, mode=mode, score_threshold=0)]


async def _export_in_the_gap(tmp_path: Path, server: ProviderServer,
                             env: dict[str, str]) -> Path:
    """An index of three notes, one embedded before the provider went down, two waiting,
    exported while its server runs."""
    config = _config(tmp_path / "a", server, env, copy=False)
    (config.watched.root / "lighthouse.md").write_text(NOTES["lighthouse.md"])
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        async def first_embedded() -> bool:
            return await _paths(rt, "lighthouse keeper", "vector") == ["lighthouse.md"]

        await until(first_embedded, bool)
        server.always = Fault(503)  # the provider goes down: new notes wait for vectors
        for name in ("sourdough.md", "glacier.md"):
            (config.watched.root / name).write_text(NOTES[name])

        async def two_waiting() -> bool:
            return await _waiting(rt) == 2 and await _paths(rt, "glacier") == ["glacier.md"]

        await until(two_waiting, bool)
        out = tmp_path / "export.jsonl"
        result = await archive.export(config.main_place(), out)
    assert (result.documents, result.chunks, result.chunks_waiting) == (3, 3, 2)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    vectors = {d["external_id"].removeprefix("file:"): [c["vector"] for c in d["chunks"]]
               for d in lines[1:-1]}
    assert vectors["sourdough.md"] == vectors["glacier.md"] == [None]
    assert isinstance(vectors["lighthouse.md"][0], str)
    assert lines[-1] == {"type": "end", "documents": 3, "chunks": 3, "waiting": 2}
    return out


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def exported_in_the_gap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Path, dict[str, str]]]:
    """The index of `_export_in_the_gap`, exported once for the module's tests (in a SQLite
    file, or in a schema of the session's Postgres), and its store's settings."""
    env: dict[str, str] = {}
    if request.param == "postgres":
        env = {"STORE": "postgres", "DATABASE_URL": request.getfixturevalue("pg_url"),
               "PG_SCHEMA": new_schema()}
    root = tmp_path_factory.mktemp("exported")
    try:
        with provider_server(FakeEmbedder().embed) as server, \
                pytest.MonkeyPatch.context() as patch:
            _back_soon(patch)
            yield anyio.run(_export_in_the_gap, root, server, env), env
    finally:
        if env:
            drop_schemas(env["DATABASE_URL"], env["PG_SCHEMA"])


async def test_chunks_waiting_for_vectors_are_exported_and_imported_as_waiting(
        tmp_path: Path, fake_provider: ProviderServer,
        exported_in_the_gap: tuple[Path, dict[str, str]]) -> None:
    exported, store_env = exported_in_the_gap
    fake_provider.always = Fault(503)  # still down
    # Imported while the provider is still down: nothing embedded, all found by keywords;
    # then a server of the same notes (another copy of the folder) embeds what waits.
    config = _config(tmp_path / "b", fake_provider, store_env, copy=True)
    async with running(config, serving(False), embedding=provider_embedding(config)) as rt:
        result = await archive.import_file(rt.writing, exported, identity=rt.services.identity)
        assert (result.documents, result.chunks, result.chunks_embedded,
                result.chunks_waiting) == (3, 3, 0, 2)
        assert result.same_model
        assert await _waiting(rt) == 2
        for name, words in (("sourdough.md", "sourdough starter"), ("glacier.md", "fjord"),
                            ("lighthouse.md", "spiral stairs")):
            assert await _paths(rt, words) == [name]
        # The note that had its vector brought it along.
        assert await _paths(rt, "lighthouse keeper", "vector") == ["lighthouse.md"]
        found = await Tools(rt)("search", query="glacier fjord", score_threshold=0)
        assert "2 chunks still wait for their vectors" in found["notice"]
    for name, text in NOTES.items():
        (config.watched.root / name).write_text(text)
    fake_provider.always = None  # it returns: a server of the folder embeds the rest
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        async def embedded() -> bool:
            return await _waiting(rt) == 0

        await until(embedded, bool)
        assert (await _paths(rt, "ice calving into the sea", "vector"))[0] == "glacier.md"
        status = await Tools(rt)("status")
        assert (status["documents"], status["chunks"]) == (3, 3)


async def test_an_end_line_that_miscounts_the_waiting_chunks_is_refused_whole(
        tmp_path: Path, fake_provider: ProviderServer,
        exported_in_the_gap: tuple[Path, dict[str, str]]) -> None:
    exported, store_env = exported_in_the_gap
    lines = exported.read_text().splitlines()
    altered = tmp_path / "altered.jsonl"
    end = json.loads(lines[-1])
    altered.write_text("\n".join([*lines[:-1], json.dumps({**end, "waiting": 0})]) + "\n")
    unmarked = tmp_path / "unmarked.jsonl"  # as a file of an older version would say it
    unmarked.write_text("\n".join([*lines[:-1], json.dumps(
        {"type": "end", "documents": 3, "chunks": 3})]) + "\n")
    config = _config(tmp_path / "b", fake_provider, store_env, copy=True)
    # a server of its tools, no folder
    async with running(config, serving(False), embedding=provider_embedding(config)) as rt:
        for path in (altered, unmarked):
            with pytest.raises(InvalidRequest, match="2 of them without a vector"):
                await archive.import_file(rt.writing, path, identity=rt.services.identity)
        status = await Tools(rt)("status")
        assert (status["documents"], status["chunks"], status["chunks_waiting"]) == (0, 0, 0)
