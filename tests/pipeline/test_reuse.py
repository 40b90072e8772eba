"""Vectors reused across runs, and one scan that never waits on the embedder's idle look:
a file deleted and restored, or moved to another folder, embeds nothing; whatever a scan
finds (changes, deletions, keywords first, nothing), it ends when its last write is
committed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.index import A, B, Index

from pocketmcp.pipeline import embedder


async def test_a_deleted_file_restored_unchanged_embeds_no_chunk(fake_index: Index,
                                                                  write) -> None:
    path = write("notes/a.md", A)
    write("b.md", B)
    first = await fake_index.index_once()
    assert first.stats.chunks_embedded >= 1
    held = path.read_text()
    path.unlink()
    gone = await fake_index.index_once()
    assert gone.stats.removed == 1 and gone.stats.chunks_removed >= 1
    write("notes/a.md", held)
    back = await fake_index.index_once()
    s = back.stats
    assert (s.added, s.chunks_embedded, fake_index.embedded) == (1, 0, [])
    assert s.chunks_reused == gone.stats.chunks_removed
    assert fake_index.search("wild yeast starter")[0] == "notes/a.md"


async def test_a_file_moved_to_another_folder_between_runs_embeds_no_chunk(
        fake_index: Index, write) -> None:
    write("one/a.md", A)
    await fake_index.index_once()
    (fake_index.kb / "two").mkdir()
    (fake_index.kb / "one" / "a.md").rename(fake_index.kb / "two" / "a.md")
    moved = await fake_index.index_once()
    s = moved.stats
    assert (s.added, s.removed, s.chunks_embedded, fake_index.embedded) == (1, 1, 0, [])
    assert fake_index.search("wild yeast starter")[0] == "two/a.md"


def _edit(kb: Path) -> None:
    (kb / "a.md").write_text(A + "\nRye flour makes the starter more active.\n")


def _delete(kb: Path) -> None:
    (kb / "b.md").unlink()


def _restore(kb: Path) -> None:
    (kb / "b.md").rename(kb / "c.md")  # the same text under another name: all reused


@pytest.mark.parametrize("change", [_edit, _delete, _restore])
@pytest.mark.parametrize("keywords_first", [False, True])
async def test_one_scan_ends_with_its_last_write_not_with_the_embedders_next_look(
        fake_index: Index, write, monkeypatch: pytest.MonkeyPatch, change,
        keywords_first: bool) -> None:
    """Whatever the scan writes, the embedder is woken by the writes it waits for and by
    the scan's end: its timed look (IDLE_S) never comes in this test."""
    write("a.md", A)
    write("b.md", B)
    await fake_index.index_once()
    change(fake_index.kb)
    monkeypatch.setattr(embedder, "IDLE_S", 3600.0)
    with anyio.fail_after(60):
        pipeline = await fake_index.index_once(keywords_first=keywords_first)
    s = pipeline.stats
    assert s.added + s.updated + s.removed >= 1
    assert s.chunks_waiting == (s.chunks_written - s.chunks_reused if keywords_first else 0)


def _section(topic: str) -> str:
    return f"## {topic}\n\n" + " ".join(
        f"Observation {j} records how {topic.lower()} change with the seasons and the tides."
        for j in range(10)) + "\n"


async def test_a_section_pasted_into_another_note_under_the_same_heading_embeds_no_chunk(
        fake_index: Index, write) -> None:
    write("a.md", _section("Glaciers") + "\n" + _section("Volcanoes"))
    await fake_index.index_once()
    # The glaciers section moves to a note of its own; a.md keeps the volcanoes.
    write("a.md", _section("Volcanoes"))
    await fake_index.index_once()
    write("b.md", _section("Deserts") + "\n" + _section("Glaciers"))
    pasted = await fake_index.index_once()
    s = pasted.stats
    assert (s.added, s.chunks_reused) == (1, 1)
    assert all("Deserts" in text for text in fake_index.embedded)


async def test_the_model_is_loaded_before_the_first_batch_and_never_by_a_run_with_nothing_to_embed(
        fake_index: Index, write) -> None:
    loads: list[int] = []

    async def load() -> None:
        loads.append(len(fake_index.embedded))  # what was embedded before it loaded

    write("a.md", A)
    write("b.md", B)
    await fake_index.index_once(load=load)
    assert loads == [0]
    loads.clear()
    unchanged = await fake_index.index_once(load=load)
    assert (unchanged.stats.unchanged, loads) == (2, [])
    (fake_index.kb / "b.md").rename(fake_index.kb / "c.md")  # all its vectors reused
    moved = await fake_index.index_once(load=load)
    assert (moved.stats.added, moved.stats.chunks_embedded, loads) == (1, 0, [])
