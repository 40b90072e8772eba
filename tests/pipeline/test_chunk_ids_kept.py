"""A chunk keeps its id when its vector comes, on both stores: the `mcp+doc://DOC#CHUNK`
link a search gives while the chunk waits for its vector names the same passage once the
vector is in, and a search by meaning then finds the chunk under that id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp import Client
from support.mcp_harness import until
from support.provider_server import Fault, ProviderServer
from support.runtime import provider_embedding, remote_config, running
from support.tools import Tools

from pocketmcp.mcp.server import build_server
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime

QUERY = "herons standing in shallow water"


async def _read(rt: Runtime, uri: str) -> dict[str, Any]:
    """The resource at `uri` as a client reads it (a new session, nothing cached)."""
    async with Client(build_server(rt), mode="legacy") as client:
        result = await client.read_resource(uri, cache_mode="bypass")
    text = getattr(result.contents[0], "text", None)
    assert isinstance(text, str), result
    found: dict[str, Any] = json.loads(text)
    return found


async def test_a_link_taken_while_a_chunk_waits_names_it_once_its_vector_is_in(
        tmp_path: Path, fake_provider: ProviderServer, store_env: dict[str, str]) -> None:
    config = remote_config(tmp_path, fake_provider, store_env)
    fake_provider.always = Fault(503)  # the gap stays open while the provider is down
    (config.watched.root / "birds.md").write_text(
        "# Birds\n\nHerons stand still in the shallow water, waiting for fish.\n")
    (config.watched.root / "tea.md").write_text(
        "# Tea\n\nGreen tea is brewed cooler than black tea.\n")
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        tools = Tools(rt)

        async def found() -> list[dict[str, Any]]:
            return await tools.search(QUERY, top_k=1, score_threshold=0)

        [waiting] = await until(found, lambda m: [x["path"] for x in m] == ["birds.md"], 20)
        assert waiting["vector_score"] is None  # found by its words: it waits
        link, chunk_id = waiting["resource"], waiting["chunk_id"]
        assert link == f"mcp+doc://{waiting['doc_id']}#{chunk_id}"
        before = await _read(rt, link)
        assert before["chunk_id"] == chunk_id and "Herons stand still" in before["text"]
        assert (await tools("status"))["chunks_waiting"] == 2

        fake_provider.always = None  # the provider returns: the vectors come
        await until(lambda: tools("status"), lambda s: s["chunks_waiting"] == 0, 20)

        assert await _read(rt, link) == before  # the same chunk, under the same link
        [by_meaning] = await tools.search(QUERY, mode="vector", top_k=1)
        assert (by_meaning["chunk_id"], by_meaning["resource"], by_meaning["path"]) == (
            chunk_id, link, "birds.md")
        assert by_meaning["vector_score"] is not None
        [hybrid] = await tools.search(QUERY, top_k=1)
        assert hybrid["chunk_id"] == chunk_id and hybrid["vector_score"] is not None
        status = await tools("status")
        assert (status["documents"], status["chunks"]) == (2, 2)
