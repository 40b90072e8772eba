"""How much work one search does: a dated search runs under one deadline and at most twice,
and a ranking retried after an edit does not embed its query again."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.fake_embedder import FakeEmbedder
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.plans import Plan
from pocketmcp.search import dated, deadline
from pocketmcp.search import run as search

TODAY = dt.date(2026, 3, 18)  # a Wednesday


class Counted:
    """Deadlines opened and queries embedded while a search runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.deadlines = 0
        self.embedded: list[str] = []
        within, embed_query = deadline.within, FakeEmbedder.embed_query

        @asynccontextmanager
        async def counted_within(seconds: float | None) -> AsyncIterator[None]:
            self.deadlines += 1
            async with within(seconds):
                yield

        async def counted_embed(embedder: FakeEmbedder, text: str) -> Any:
            self.embedded.append(text)
            return await embed_query(embedder, text)

        monkeypatch.setattr(deadline, "within", counted_within)
        monkeypatch.setattr(FakeEmbedder, "embed_query", counted_embed)


async def test_a_dated_search_runs_under_one_deadline_and_never_twice_alike(
        fake_tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dated, "today", lambda: TODAY)
    await fake_tools.add(
        ("lisbon", "---\ndate: 2026-03-10\n---\n\nLisbon trip: trams, tiles and the budget.\n"),
        ("garden", "---\ndate: 2026-03-11\n---\n\nThe garden needs new tomato stakes.\n"),
        ("old", "---\ndate: 2025-01-05\n---\n\nLisbon trip budget, planned long ago.\n"))
    count = Counted(monkeypatch)

    # Asking for little more than the time: the span's best, under the threshold, from
    # one run (the strict run and the one keeping the best anyway were the same search).
    reply = await fake_tools("search", query="what did I write last week",
                             score_threshold=0.99, unique_docs=True)
    assert reply["matches"], reply
    assert "dates: 'last week' taken as" in reply["notice"], reply["notice"]
    assert "no match reached score_threshold" in reply["notice"], reply["notice"]
    assert (count.deadlines, len(count.embedded)) == (1, 1), (count.deadlines, count.embedded)

    # Asking about something no note of the span reaches: the span's run, then any date.
    count.deadlines, count.embedded = 0, []
    reply = await fake_tools("search", query="Lisbon trip budget last week",
                             score_threshold=0.99, unique_docs=True)
    assert "no document of that time matched" in reply["notice"], reply["notice"]
    assert count.deadlines == 1, count.deadlines
    assert count.embedded == ["Lisbon trip budget", "Lisbon trip budget last week"]

    # Reaching the threshold: one run.
    count.deadlines, count.embedded = 0, []
    reply = await fake_tools("search", query="Lisbon trip budget last week",
                             score_threshold=0.0, unique_docs=True)
    assert "no document of that time matched" not in reply["notice"], reply["notice"]
    assert (count.deadlines, len(count.embedded)) == (1, 1)


async def test_a_ranking_retried_after_an_edit_embeds_its_query_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A document edited between a search's ranking and its reading of the rows: the chunks
    it ranked are gone (the edit wrote others), so it ranks again, finds the new text, and
    does not embed its query again. (A chunk getting its vector keeps its id: that commit
    needs no second ranking, tests/search/test_search_meets_vectors.py.)"""
    config = make_config(tmp_path)
    async with running(config, Plan(feed="scan", keep_serving=True),
                       embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
        tools = Tools(rt)
        await tools.add(("plan", "An old note about launch checklists."))
        retrieve = search.retrieve
        rankings = 0

        async def then_edit(*args: Any, **kw: Any) -> Any:
            nonlocal rankings
            rankings += 1
            staged = await retrieve(*args, **kw)
            if rankings == 1:  # the first ranking only: the edit committed after it
                await tools.add(("plan", "An old note about launch checklists, revised."))
            return staged

        monkeypatch.setattr(search, "retrieve", then_edit)
        count = Counted(monkeypatch)
        [match] = await tools.search("launch checklists", top_k=1)
        assert "revised" in match["preview"], match
        assert rankings == 2, "the ranking was not retried: nothing here is checked"
        assert count.embedded == ["launch checklists"]


async def test_chunks_waiting_for_vectors_are_counted_on_a_stage_read(
        fake_tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    """No read of its own for the waiting chunks: hybrid and keyword-fallback searches
    count them with the keyword stage, vector searches with the vector stage."""
    from pocketmcp.store.sqlite.reads import SqliteIndex

    await fake_tools.add(("tea", "Tea is brewed cooler than coffee."),
                         ("bikes", "A chain wants oil after a wet ride."))
    reads = 0
    run = SqliteIndex.run

    async def counted(self: SqliteIndex, fn: Any) -> Any:
        nonlocal reads
        reads += 1
        return await run(self, fn)

    monkeypatch.setattr(SqliteIndex, "run", counted)
    for mode, expected in (("hybrid", 3), ("vector", 2), ("keyword", 2)):
        reads = 0
        found = await fake_tools.search("tea brewed cooler", mode=mode, top_k=2)
        assert found, mode
        assert reads == expected, (mode, reads)
