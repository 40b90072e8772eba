"""Documents written through the tools while the embedding provider is down: a server that
watches its folder writes them for keyword search at once (found, with a notice that vectors
wait) and gives them their vectors when the provider answers again, over both stores. A
process with no embedder beside its writer still refuses them with the provider's error."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mcp_harness import until
from support.provider_server import Fault, ProviderServer
from support.runtime import provider_embedding, remote_config, running
from support.tools import ToolFailed, Tools

from pocketmcp.config import Config
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime


@pytest.fixture
def config(tmp_path: Path, fake_provider: ProviderServer, store_env: dict[str, str],
           provider_back_soon: None, polled_searches: None) -> Config:
    extra = tmp_path / "extra"
    extra.mkdir()
    return remote_config(tmp_path, fake_provider, {**store_env, "ALLOWED_ROOTS": str(extra)})


async def _found(rt: Runtime, query: str, mode: str = "keyword") -> list[int]:
    return [m["doc_id"] for m in await Tools(rt).search(query, mode=mode, score_threshold=0)]


async def test_tool_documents_are_found_by_keywords_while_the_provider_is_down(
        config: Config, fake_provider: ProviderServer, tmp_path: Path) -> None:
    fake_provider.always = Fault(503)
    report = tmp_path / "extra" / "report.md"
    report.write_text("# Report\n\nThe orchard's apple harvest doubled this autumn.\n")
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        tools = Tools(rt)
        added = await tools.add(("otters", "Otters dive from the riverbank at dawn."),
                                ("herons", "Herons stand still in the shallow water."))
        assert set(added) == {"otters", "herons"}
        ingested = await tools("ingest_file", path=str(report))
        assert ingested["status"] == "indexed" and ingested["chunks"] == 1
        assert await _found(rt, "otters riverbank") == [added["otters"]]
        assert await _found(rt, "apple harvest") == [ingested["doc_id"]]
        found = await tools("search", query="herons", score_threshold=0)
        assert "3 chunks still wait for their vectors" in found["notice"]
        assert (await tools("status"))["chunks_waiting"] == 3
        fake_provider.always = None  # it answers again: the vectors follow

        async def embedded() -> bool:
            return (await tools("status"))["chunks_waiting"] == 0

        await until(embedded, bool)
        # Every document is found by its vector now (the test provider's vectors are not
        # semantic: the same text gives the same vector).
        by_vector = await _found(rt, "Otters dive from the riverbank at dawn.", "vector")
        assert by_vector[0] == added["otters"]
        assert sorted(by_vector) == sorted([*added.values(), ingested["doc_id"]])
        assert (await tools("search", query="herons", score_threshold=0))["notice"] is None
        status = await tools("status")
        assert (status["documents"], status["chunks"]) == (3, 3)


async def test_without_an_embedder_beside_the_writer_the_provider_error_stands(
        config: Config, fake_provider: ProviderServer) -> None:
    fake_provider.always = Fault(503)
    # no folder: nothing embeds later
    async with running(config, serving(False), embedding=provider_embedding(config)) as rt:
        with pytest.raises(ToolFailed, match="EMBEDDING_UNAVAILABLE"):
            await Tools(rt).add(("otters", "Otters dive from the riverbank at dawn."))
        assert (await Tools(rt)("status"))["documents"] == 0
