"""Keyword search from the first scan, vectors following: notes are searchable by their
words as soon as they are written, a search in the gap says how many chunks still wait for
vectors, an edit in the gap replaces the old text, the newest and edited notes get their
vectors first, and a later run (or a running server) completes them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.index import Index
from support.mcp_harness import until
from support.provider_server import Fault, ProviderServer
from support.runtime import (
    make_config,
    provider_embedding,
    remote_config,
    running,
    shared,
    with_fields,
)
from support.tools import Tools

from pocketmcp.config import Config
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.plans import READING, serving
from pocketmcp.runtime import Runtime

NOTES = 12
TOPICS = ["lighthouse", "sourdough", "glacier", "violin", "orchard", "comet", "harbour",
          "beehive", "telescope", "quarry", "lantern", "marsh"]


def _note(i: int) -> str:
    return (f"# Note {i}\n\nThis note is about the {TOPICS[i]}: a {TOPICS[i]} seen on "
            f"day {i} of the journey, written down before the evening.\n")


async def _search(rt: Runtime, query: str, **args: Any) -> dict[str, Any]:
    return await Tools(rt)("search", query=query, **args)


@pytest.mark.usefixtures("model_processes")
async def test_a_search_in_the_gap_finds_notes_by_keywords_and_says_vectors_wait(
        tmp_path: Path, embedder: LocalEmbedder) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(NOTES):
        (kb / f"n{i:02}.md").write_text(_note(i))
    first = run_cli(tmp_path, "index", "--keywords-first", "--json", "--progress", "off")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["added"] == NOTES and summary["chunks_embedded"] == 0
    waiting = summary["chunks_waiting"]
    assert waiting == summary["chunks_keywords"] >= NOTES and summary["chunks_vectors"] == 0
    # A reading process: nothing embeds while it searches, the gap stays open.
    config = make_config(tmp_path, {"SQLITE_PATH": str(tmp_path / "idx" / "index.db")})
    async with running(config, READING, embedding=shared(embedder, config)) as rt:
        found = await _search(rt, "telescope")
        assert found["matches"][0]["path"] == "n08.md"
        assert found["notice"] == (f"{waiting} chunks still wait for their vectors: they are "
                                   "found by their keywords until then")
        assert found["matches"][0]["vector_score"] is None
        by_meaning = await _search(rt, "telescope", mode="vector")
        assert by_meaning["matches"] == []
        assert "vector results leave them out" in by_meaning["notice"]
        status = await Tools(rt)("status")
        assert status["chunks_waiting"] == waiting
    second = run_cli(tmp_path, "index", "--json", "--progress", "off")
    assert second.returncode == 0, second.stderr
    done = json.loads(second.stdout)
    assert (done["unchanged"], done["added"], done["chunks_waiting"]) == (NOTES, 0, 0)
    assert done["chunks_vectors"] == done["chunks_embedded"] == waiting
    async with running(config, READING, embedding=shared(embedder, config)) as rt:
        found = await _search(rt, "telescope")
        assert found["matches"][0]["path"] == "n08.md" and found["notice"] is None
        assert found["matches"][0]["vector_score"] is not None
        by_meaning = await _search(rt, "an instrument for looking at stars", mode="vector")
        assert by_meaning["matches"][0]["path"] == "n08.md"
        assert (await Tools(rt)("status"))["chunks_waiting"] == 0


async def test_a_lone_note_waiting_for_its_vector_is_found_by_a_longer_question(
        tmp_path: Path, processes: dict[str, str]) -> None:
    """The only note in an index shares every word it matches with all the notes there are:
    BM25 gives it next to nothing, under the default score threshold. It is still shown,
    with notices saying why, not an empty list."""
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a tyre.\n")
    first = run_cli(tmp_path, "index", "--keywords-first", "--json", "--progress", "off")
    assert first.returncode == 0, first.stderr
    config = make_config(tmp_path, {**processes, "SQLITE_PATH": str(tmp_path / "idx" / "index.db")})
    async with running(config, READING, embedding=provider_embedding(config)) as rt:
        found = await _search(rt, "repair a punctured bicycle tyre", top_k=3)
        assert [m["path"] for m in found["matches"]] == ["bikes.md"], found
        assert found["matches"][0]["vector_score"] is None
        assert "no match reached score_threshold 0.2" in found["notice"]
        assert "1 chunks still wait for their vectors" in found["notice"]


@pytest.fixture
def gap_config(tmp_path: Path, fake_provider: ProviderServer, store_env: dict[str, str],
               provider_back_soon: None, polled_searches: None) -> Config:
    # The edit is seen 10 ms after it settles (not 50): the test waits on it.
    return remote_config(tmp_path, fake_provider, {**store_env, "DEBOUNCE_MS": "10"})


async def test_an_edit_in_the_gap_replaces_the_old_text(
        gap_config: Config, fake_provider: ProviderServer) -> None:
    fake_provider.always = Fault(503)  # the gap stays open while the provider is down
    note = gap_config.watched.root / "birds.md"
    note.write_text("# Birds\n\nHerons stand still in the shallow water.\n")
    async with running(gap_config, serving(True), embedding=provider_embedding(gap_config)) as rt:
        async def found(words: str) -> list[str]:
            return [m["path"] for m in await Tools(rt).search(words, score_threshold=0)]

        async def herons_found() -> bool:
            return await found("herons") == ["birds.md"]

        await until(herons_found, bool, 20)
        note.write_text("# Birds\n\nOtters dive from the riverbank at dawn.\n")

        async def otters_found() -> bool:
            return await found("otters") == ["birds.md"]

        await until(otters_found, bool, 20)
        assert await found("herons") == []  # the old text went with the edit, whole
        result = await _search(rt, "otters riverbank", score_threshold=0)
        assert "1 chunks still wait for their vectors" in result["notice"]
        status = await Tools(rt)("status")
        assert status["chunks_waiting"] == 1
        assert status["vectors_eta_s"] is None  # nothing embedded yet: no speed to go by


async def test_a_note_written_in_the_gap_gets_its_vector_once_the_provider_returns(
        gap_config: Config, fake_provider: ProviderServer) -> None:
    fake_provider.always = Fault(503)  # the gap stays open while the provider is down
    note = gap_config.watched.root / "birds.md"
    note.write_text("# Birds\n\nOtters dive from the riverbank at dawn.\n")
    async with running(gap_config, serving(True), embedding=provider_embedding(gap_config)) as rt:
        async def waiting() -> bool:
            return (await Tools(rt)("status"))["chunks_waiting"] == 1

        await until(waiting, bool, 20)
        fake_provider.always = None  # the provider returns: the new text gets its vector

        async def embedded() -> bool:
            return (await Tools(rt)("status"))["chunks_waiting"] == 0

        await until(embedded, bool, 20)
        by_meaning = await _search(rt, "otters riverbank", mode="vector")
        assert [m["path"] for m in by_meaning["matches"]] == ["birds.md"]
        assert by_meaning["notice"] is None
        status = await Tools(rt)("status")
        assert (status["documents"], status["chunks"]) == (1, 1)
        assert (status["chunks_waiting"], status["vectors_eta_s"]) == (0, 0.0)


async def test_the_newest_notes_and_an_edit_get_their_vectors_first(
        fake_index: Index, write) -> None:
    index = fake_index
    for i in range(8):
        path = write(f"n{i}.md", f"Note {i} about topic {i}.")
        os.utime(path, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    await index.index_once(keywords_first=True)
    assert index.embedded == []  # keywords only: nothing embedded yet
    edited = write("n2.md", "Note 2 about topic 2, edited: the plans changed.")
    os.utime(edited, ns=(1_600_000_000_000_000_000,) * 2)  # an old time: the edit still leads
    await index.index_once(keywords_first=True)
    config = with_fields(index.config, embed={"batch_size": 1})
    index.config = config
    await index.index_once()
    order = [text.split(" about")[0] for text in index.embedded]
    assert order == ["Note 2", "Note 7", "Note 6", "Note 5", "Note 4", "Note 3", "Note 1",
                     "Note 0"]


def test_the_time_left_for_vectors_is_the_waiting_chunks_at_the_speed_measured() -> None:
    from pocketmcp.ops.index import vectors_eta
    from pocketmcp.pipeline.state import Stats

    class Feed:
        stats = Stats(chunks_embedded=40, embed_ms=2000.0)  # 20 chunks a second

    assert vectors_eta(100, Feed()) == 5.0  # type: ignore[arg-type]
    assert vectors_eta(0, Feed()) == 0.0  # type: ignore[arg-type]
    assert vectors_eta(100, None) is None
