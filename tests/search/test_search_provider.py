"""Searches while the embedding provider is down: keyword results, and a notice saying why."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from support.provider_server import Fault, ProviderServer
from support.runtime import provider_embedding, remote_config, running
from support.tools import Tools, refused

from pocketmcp.errors import ProviderUnavailable


async def test_while_the_provider_is_down_searches_answer_by_keywords_and_say_why(
    tmp_path: Path, fake_provider: ProviderServer
) -> None:
    provider = fake_provider
    # No retries, and down for base x 2 = 40 s after a failure: what follows comes well inside
    # that time, however busy the machine; the test then brings the retry time forward.
    config = remote_config(tmp_path, provider, embed={"retries": 0, "retry_base_s": 20.0})
    async with running(config, embedding=provider_embedding(config)) as rt:
        tools = Tools(rt)
        ids = await tools.add(("owls", "Owls hunt at night in the forest."),
                              ("bread", "Bread needs yeast, flour and time."))
        assert (await tools("search", query="owls at night"))["notice"] is None
        provider.always = Fault(503)
        with anyio.fail_after(5):
            hybrid = await tools("search", query="owls in the forest", mode="hybrid")
        assert "only keyword results" in hybrid["notice"] and "503" in hybrid["notice"]
        assert [m["doc_id"] for m in hybrid["matches"]] == [ids["owls"]]
        assert hybrid["matches"][0]["vector_score"] is None
        asked = len(provider.requests())
        with anyio.fail_after(10):  # the provider is known to be down: no waiting on it
            vector = await tools("search", query="yeast", mode="vector")
        assert len(provider.requests()) == asked
        assert vector["notice"] and [m["doc_id"] for m in vector["matches"]] == [ids["bread"]]
        keyword = await tools("search", query="yeast", mode="keyword")
        assert keyword["notice"] is None and keyword["matches"]
        similar = await tools("find_similar_documents", text="flour and yeast")
        assert "not a cosine similarity" in similar["notice"]
        with refused(ProviderUnavailable, match="503"):  # a write says so, writes nothing
            await tools.add(("newts", "Newts live in ponds."))
        assert len((await tools("list_documents"))["documents"]) == 2
        provider.always = None
        usage = rt.services.embedder.usage
        assert usage.retry_in() is not None
        usage.retry_at = time.time()  # the retry time has come
        assert usage.retry_in() is None
        back = await tools("search", query="owls at night", mode="vector")
        assert back["notice"] is None and back["matches"][0]["vector_score"] is not None
