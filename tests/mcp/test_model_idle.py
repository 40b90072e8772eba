"""The model only when needed: unloaded after MODEL_IDLE_UNLOAD_S without use, loaded again
on demand, searches answered by keywords meanwhile; with the real model and real servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.mcp_harness import HttpServer, call, start_http, stop_http, until
from support.runtime import SharedModel, make_config, shared

from pocketmcp import readiness
from pocketmcp.core.identity import Identity
from pocketmcp.embed.base import Embedder
from pocketmcp.embed.keeper import ModelState
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.errors import ModelLoading
from pocketmcp.plans import INDEXING, READING
from pocketmcp.runtime import open_runtime
from pocketmcp.search.run import search


@pytest.fixture
def server(tmp_path: Path, model_processes: dict[str, str]) -> Iterator[HttpServer]:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C for two "
                                            "minutes.\n")
    (tmp_path / "kb" / "bread.md").write_text("# Bread\n\nSourdough rises slowly overnight in "
                                              "a cool kitchen.\n")
    served = start_http(tmp_path, MODEL_IDLE_UNLOAD_S="2")
    try:
        yield served
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]


async def until_state(session: Any, wanted: str, within_s: float) -> dict[str, Any]:
    return await until(lambda: call(session, "status"),
                       lambda status: status["sharing"]["model_state"] == wanted, within_s)


async def until_vectors(session: Any, within_s: float) -> None:
    await until(lambda: call(session, "status"),
                lambda status: status["chunks_waiting"] == 0, within_s)


async def until_hybrid(session: Any, query: dict[str, Any], within_s: float) -> dict[str, Any]:
    """The first search answered with vectors (the model loaded), asking again while it is
    answered by keywords (a search that finds the model unloaded loads it again)."""
    def hybrid(found: dict[str, Any]) -> bool:
        if found["notice"] is None and found["matches"][0]["vector_score"] is not None:
            return True
        assert "loaded again" in found["notice"], found
        return False

    return await until(lambda: call(session, "search", query), hybrid, within_s)


async def test_searches_go_on_while_the_model_is_unloaded_and_loaded_again(
        server: HttpServer) -> None:
    query = {"query": "how hot should green tea be", "top_k": 1, "mode": "hybrid"}
    with anyio.fail_after(120):
        async with server.session() as one, server.session() as two:
            # Ready means searchable by keywords; the vectors follow, and the model may have
            # been unloaded meanwhile (two seconds idle): wait for both before the warm search.
            await until_vectors(one, 60)
            warm = await until_hybrid(one, query, 30)
            assert warm["matches"][0]["path"] == "tea.md"
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
            # A hang bound: that they did not wait for the model is what their keyword
            # answers show (how soon they come: bench/shared.py, `unload`).
            assert time.perf_counter() - started < 30
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
    async def now() -> str:
        return state.state

    await until(now, lambda seen: seen == wanted, within_s)


async def test_the_embedder_unloads_only_when_idle_and_reloads_on_demand(
        embedder: LocalEmbedder) -> None:
    spec = embedder.spec  # a model of its own: the run's one never unloads
    embedder = LocalEmbedder(spec, idle_unload_s=0.5)
    try:
        state = embedder.model_state
        assert (await embedder.embed_query("tea")).shape == (spec.dim,)
        state.begin()  # in use: never unloaded, however long (here four times the idle time)
        await anyio.sleep(2.0)
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


class SlowLoad:
    """The real model, loaded only once the test lets it (`loaded.set()`): a model that
    loads slowly at start."""

    def __init__(self, real: SharedModel) -> None:
        self._real = real
        self.loaded = threading.Event()

    async def identity(self, stored: Identity | None) -> Identity:
        return await self._real.identity(stored)

    def make(self, identity: Identity) -> Embedder:
        self.loaded.wait(60)  # in boot's worker thread, as a real load blocks
        return self._real.make(identity)


async def test_searches_answer_by_keywords_while_the_model_loads_at_start(
        tmp_path: Path, embedder: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    config = make_config(tmp_path)
    (config.watched.root / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C.\n")
    async with open_runtime(config, INDEXING, embedding=shared(embedder, config)) as indexing:
        with anyio.fail_after(60):
            await indexing.fed.wait()
    # The start-up wait made far longer than the early search may take: an early search that
    # waited for it (or for the model) would not answer in time.
    monkeypatch.setattr(readiness, "READY_WAIT_S", 120.0)
    slow = SlowLoad(shared(embedder, config))
    with anyio.fail_after(60):
        async with open_runtime(config, READING, embedding=slow) as runtime:
            with anyio.fail_after(30):  # neither the load nor the start-up wait
                early = await search(await runtime.reading(), "green tea", top_k=1)
            assert not slow.loaded.is_set()  # answered while the model was loading
            slow.loaded.set()
            assert early.notice is not None and "still loading" in early.notice
            assert early.matches[0].path == "tea.md" and early.matches[0].vector_score is None
            await runtime.started()
            later = await search(await runtime.reading(), "green tea", top_k=1)
            assert later.notice is None and later.matches[0].vector_score is not None
