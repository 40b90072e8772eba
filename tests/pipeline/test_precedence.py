"""Searches go before indexing: while a search is in flight, the pipeline's stages wait
between their steps (each at most GIVE_WAY_S), and every search (the tools, the web page)
marks itself in flight, on the precedence the runtime owns."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest
from starlette.applications import Starlette
from support.index import Index
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime
from pocketmcp.web.auth import Logins
from pocketmcp.web.routes import routes

NOTE = "# Note {i}\n\nThe {word} was seen on day {i}, written down before the evening.\n"
WORDS = ["lighthouse", "glacier", "violin"]


async def test_give_way_waits_for_the_searches_in_flight_and_no_longer() -> None:
    gate = Precedence()
    assert await gate.give_way() == 0.0  # none in flight: no wait at all

    async def search_for(seconds: float) -> None:
        with gate.searching():
            await anyio.sleep(seconds)

    async with anyio.create_task_group() as tg:
        tg.start_soon(search_for, 0.3)
        await anyio.sleep(0.02)
        waited = await gate.give_way(most_s=5.0)
    assert 0.2 <= waited < 2.0  # until the search ended, not the whole bound
    assert gate.active == 0
    with gate.searching():  # a search that does not end: the step goes on after the bound
        waited = await gate.give_way(most_s=0.2)
    assert 0.2 <= waited < 2.0
    assert gate.waits == 2


async def test_a_scan_writes_nothing_while_a_search_is_in_flight(
        fake_index: Index, write, monkeypatch: pytest.MonkeyPatch) -> None:
    for i, word in enumerate(WORDS):
        write(f"n{i}.md", NOTE.format(i=i, word=word))
    bound_s = 0.2  # the stages' bound (GIVE_WAY_S), made shorter: the test holds less long
    monkeypatch.setattr(Precedence.give_way, "__defaults__", (bound_s,))
    hold_s = 2 * bound_s + 0.3  # longer than one stage's bound: the stages wait in turn
    written: list[float] = []
    started = time.monotonic()

    def on_event(event: dict[str, object]) -> None:
        fake_index.events.append(event)
        if event["event"] == "inserted":
            written.append(time.monotonic() - started)

    fake_index.on_event = on_event  # type: ignore[method-assign]

    searches = Precedence()  # what a runtime hands its pipeline and its searches

    async def a_search() -> None:
        with searches.searching():
            await anyio.sleep(hold_s)

    async with anyio.create_task_group() as tg:
        tg.start_soon(a_search)
        await anyio.lowlevel.checkpoint()
        pipeline = await fake_index.index_once(precedence=searches)
    assert pipeline.stats.added == len(WORDS)
    # The hasher waited for the search, then the chunker, then the writer: the first note
    # was written once the search had ended (about hold_s), not at once.
    assert min(written) >= hold_s - 0.1, written
    assert searches.active == 0


async def _page_search(rt: Runtime, query: str) -> None:
    """The web page's search, its routes served in this process (no guard in front)."""
    app = Starlette(routes=routes(rt, Logins("a token for this test only")))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1") as client:
        answer = await client.get("/", params={"q": query, "mode": "keyword"})
    assert answer.status_code == 200 and 'id="count"' in answer.text, answer.text[-2000:]


@pytest.mark.parametrize("caller", ["search", "find_similar_documents", "page"])
async def test_every_search_is_in_flight_while_it_runs(tmp_path: Path, caller: str) -> None:
    config = make_config(tmp_path)
    (config.watched.root / "a.md").write_text(NOTE.format(i=0, word="lighthouse"))
    seen = 0
    async with running(config, embedding=fake(config)) as rt:
        done = anyio.Event()

        async def watch() -> None:
            nonlocal seen
            while not done.is_set():
                seen = max(seen, rt.precedence.active)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                if caller == "search":
                    await Tools(rt)("search", query="lighthouse", mode="keyword")
                elif caller == "find_similar_documents":
                    await Tools(rt)("find_similar_documents", text="lighthouse")
                else:
                    await _page_search(rt, "lighthouse")
            finally:
                done.set()
        assert rt.precedence.active == 0
    assert seen == 1


async def test_the_runtime_hands_its_searches_and_its_indexing_one_precedence(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, serving(True), embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        assert rt.pipeline.precedence is rt.precedence
        assert (await rt.reading()).precedence is rt.precedence
