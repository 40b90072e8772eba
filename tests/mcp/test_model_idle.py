"""The model only when needed: unloaded after MODEL_IDLE_UNLOAD_S without use, loaded again
on demand, searches answered by keywords meanwhile; with the real model and real servers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.mcp_harness import HttpServer, call, start_http, stop_http

from pocketmcp.config import load
from pocketmcp.embed.keeper import ModelState
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.embed.models import ModelSpec
from pocketmcp.errors import ModelLoading


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HttpServer]:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C for two "
                                            "minutes.\n")
    (tmp_path / "kb" / "bread.md").write_text("# Bread\n\nSourdough rises slowly overnight in "
                                              "a cool kitchen.\n")
    served = start_http(tmp_path, MODEL_IDLE_UNLOAD_S="1")
    try:
        yield served
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]


async def until_state(session: Any, wanted: str, within_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        status = await call(session, "status")
        if status["sharing"]["model_state"] == wanted:
            return status
        assert time.monotonic() < deadline, status["sharing"]
        await anyio.sleep(0.1)


async def test_searches_go_on_while_the_model_is_unloaded_and_loaded_again(
        server: HttpServer) -> None:
    query = {"query": "how hot should green tea be", "top_k": 1, "mode": "hybrid"}
    with anyio.fail_after(120):
        async with server.session() as one, server.session() as two:
            warm = await call(one, "search", query)
            assert warm["notice"] is None and warm["matches"][0]["vector_score"] is not None
            unloaded = await until_state(one, "unloaded", 20)
            assert unloaded["sharing"]["model_unloads"] >= 1
            # Searches from two clients at once: each answers at once, by keywords while
            # the model loads, and the vector side follows once it is back.
            answers: list[dict[str, Any]] = []
            started = time.perf_counter()

            async def ask(session: Any, text: str) -> None:
                answers.append(await call(session, "search", {**query, "query": text}))

            async with anyio.create_task_group() as tg:
                for n in range(4):
                    tg.start_soon(ask, (one, two)[n % 2], f"green tea {n}")
            assert time.perf_counter() - started < 5
            assert len(answers) == 4
            keyword = [a for a in answers if a["notice"] is not None]
            assert keyword, "no search saw the model unloaded"
            for answer in keyword:
                assert "loaded again" in answer["notice"]
                assert answer["matches"][0]["path"] == "tea.md"
                assert answer["matches"][0]["vector_score"] is None
            await until_state(two, "loaded", 20)
            hybrid = await call(two, "search", {**query, "query": "green tea temperature"})
            assert hybrid["notice"] is None
            assert hybrid["matches"][0]["vector_score"] is not None
            # A write while unloaded loads the documents' session and waits for it.
            await until_state(one, "unloaded", 20)
            await call(one, "upsert_documents", {"docs": [
                {"text": "Matcha is whisked, not steeped.", "external_id": "matcha"}]})
            found = await call(one, "search", {"query": "whisked matcha", "mode": "keyword"})
            assert found["matches"][0]["preview"].startswith("Matcha")


async def reaches(state: ModelState, wanted: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while state.state != wanted:
        assert time.monotonic() < deadline, f"still {state.state}"
        await anyio.sleep(0.02)


async def test_the_embedder_unloads_only_when_idle_and_reloads_on_demand() -> None:
    spec = ModelSpec(load({}, environ={}).embed_settings())
    embedder = LocalEmbedder(spec, idle_unload_s=0.3)
    try:
        state = embedder.model_state
        assert (await embedder.embed_query("tea")).shape == (spec.dim,)
        state.begin()  # in use: never unloaded, however long
        await anyio.sleep(1.0)
        assert state.state == "loaded"
        state.end()
        await reaches(state, "unloaded", 10)
        assert embedder._queries is None and embedder._model is None
        with pytest.raises(ModelLoading):
            await embedder.embed_query("coffee")
        await reaches(state, "loaded", 30)
        assert state.loads == 1 and state.load_s is not None
        again = await embedder.embed_query("coffee")
        assert again.shape == (spec.dim,)
        # documents load their session themselves, and wait for it
        await reaches(state, "unloaded", 10)
        vectors = await embedder.embed_documents(["a note about bread"])
        assert vectors.shape == (1, spec.dim) and state.state == "loaded"
    finally:
        await embedder.aclose()
