"""The whole pipeline on real files and a real index: with the real model for a query by
its terms, with the fake embedder for the rest (what is written, skipped and re-embedded)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from support.index import A, B, Index

from pocketmcp.pipeline import embedder


def _paragraph(i: int) -> str:
    topics = ["glaciers", "volcanoes", "coral reefs", "deserts", "rainforests", "tundra",
              "estuaries", "caves", "savannas", "wetlands", "fjords", "steppes"]
    topic = topics[i % len(topics)]
    return (f"Section {i} is about {topic}. " + " ".join(
        f"Observation {j} of section {i} records how {topic} change with the seasons."
        for j in range(9)))


async def test_a_query_ranks_the_file_holding_its_terms_first(index: Index, write) -> None:
    write("a.md", A)
    write("b.md", B)
    pipeline = await index.index_once()
    assert (pipeline.stats.added, pipeline.stats.chunks_embedded) == (2, 2)
    assert index.search("starter for sourdough bread")[0] == "a.md"
    assert index.search("service virtual IP for pods")[0] == "b.md"


async def test_an_edit_is_reflected(fake_index: Index, write) -> None:
    index = fake_index
    write("a.md", A)
    write("b.md", B)
    await index.index_once()
    write("b.md", "# Tides\n\nThe moon's gravity pulls the oceans and makes the tides.\n")
    pipeline = await index.index_once()
    assert (pipeline.stats.updated, pipeline.stats.unchanged) == (1, 1)
    assert index.search("why do oceans have tides")[0] == "b.md"
    assert "Kubernetes" not in index.text_of("b.md")
    assert "moon's gravity" in index.text_of("b.md")


async def test_a_save_without_change_is_skipped_and_not_reembedded(fake_index: Index,
                                                                    write) -> None:
    index = fake_index
    write("a.md", A)
    await index.index_once()
    path = write("a.md", A)  # same bytes, new mtime
    os.utime(path, ns=(1, 1))
    pipeline = await index.index_once()
    assert pipeline.stats.unchanged == 1
    assert (pipeline.stats.added, pipeline.stats.updated) == (0, 0)
    assert index.embedded == []
    # The new stat is recorded, so the next pass does not even read the file.
    pipeline = await index.index_once()
    assert pipeline.stats.unchanged == 1 and index.embedded == []


async def test_a_scan_that_changes_nothing_ends_without_waiting_for_the_embedder(
        fake_index: Index, write, monkeypatch: pytest.MonkeyPatch) -> None:
    """One scan's run ends once its scan is done and nothing waits for a vector: the idle
    embedder is woken by the scan's end, not by its next look (IDLE_S later)."""
    write("a.md", A)
    await fake_index.index_once()
    monkeypatch.setattr(embedder, "IDLE_S", 3600.0)  # a look that never comes in this test
    with anyio.fail_after(60):
        pipeline = await fake_index.index_once()
    assert pipeline.stats.unchanged == 1 and fake_index.embedded == []


async def test_a_deleted_file_leaves_the_results(fake_index: Index, write) -> None:
    index = fake_index
    write("a.md", A)
    write("b.md", B)
    await index.index_once()
    (index.kb / "b.md").unlink()
    pipeline = await index.index_once()
    assert pipeline.stats.removed == 1
    assert index.search("kubernetes pods service") == ["a.md"]


async def test_changes_made_while_stopped_are_reconciled(fake_index: Index, write) -> None:
    index = fake_index
    write("a.md", A)
    write("b.md", B)
    write("notes/c.txt", "Espresso needs finely ground coffee and high pressure.")
    await index.index_once()
    # While nothing runs: one file edited, one deleted, one added, one made ignored.
    write("a.md", A + "\nRye flour makes the starter more active.\n")
    (index.kb / "b.md").unlink()
    write("notes/d.md", "Chess openings: the Sicilian defence answers 1.e4 with c5.")
    (index.kb / "notes" / "c.txt").rename(index.kb / "notes" / "c.txt.tmp")
    pipeline = await index.index_once()
    s = pipeline.stats
    assert (s.added, s.updated, s.removed) == (1, 1, 2)
    assert set(index.search("anything at all", k=10)) == {"a.md", "notes/d.md"}
    assert index.search("sicilian defence chess")[0] == "notes/d.md"


async def test_a_one_paragraph_edit_reembeds_only_the_changed_chunks(
    fake_index: Index, write
) -> None:
    index = fake_index
    paragraphs = [_paragraph(i) for i in range(12)]
    write("long.md", "\n\n".join(paragraphs))
    first = await index.index_once()
    total = first.stats.chunks_embedded
    assert total >= 10
    paragraphs[6] = ("Section 6 is now about lighthouses, their keepers and the lenses "
                     "that throw their beams across the water at night.")
    write("long.md", "\n\n".join(paragraphs))
    second = await index.index_once()
    s = second.stats
    assert s.updated == 1
    assert 1 <= s.chunks_embedded <= 2
    new_total = index.events[0]["chunks"]
    assert s.chunks_reused + s.chunks_embedded == new_total
    assert s.chunks_reused >= new_total - 2
    assert all("lighthouses" in text for text in index.embedded)
    assert index.search("lighthouse keepers and lenses")[0] == "long.md"


async def test_bad_files_are_skipped_and_the_rest_indexed(fake_index: Index, write) -> None:
    index = fake_index
    write("good.md", A)
    (index.kb / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(500))
    (index.kb / "latin1.txt").write_bytes("Crème brûlée needs a blowtorch.".encode("latin-1"))
    (index.kb / "huge.txt").write_bytes(b"word " * (index.config.pipeline.max_file_bytes // 5 + 10))
    (index.kb / "empty.md").write_bytes(b"")
    pipeline = await index.index_once()
    s = pipeline.stats
    assert s.skipped == 2  # the binary file and the huge one
    mb = index.config.pipeline.max_file_bytes / 2**20
    assert ("huge.txt", f"larger than the limit of {mb:g} MB (MAX_FILE_MB)") in s.recent_skips
    assert s.added == 3  # good.md, latin1.txt (decoded with replacement) and empty.md
    assert "latin1.txt" in index.search("blowtorch dessert")


async def test_symlinks_leading_out_of_the_folder_are_not_followed(
    fake_index: Index, write, tmp_path: Path
) -> None:
    index = fake_index
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("The vault combination is 1234.")
    write("a.md", A)
    (index.kb / "linked-dir").symlink_to(outside, target_is_directory=True)
    (index.kb / "linked-file.md").symlink_to(outside / "secret.md")
    (index.kb / "inner-link.md").symlink_to(index.kb / "a.md")
    pipeline = await index.index_once()
    assert pipeline.stats.added == 2  # a.md and the link that stays inside
    assert "secret" not in " ".join(index.search("vault combination", k=10))


async def test_a_watching_pipeline_stopped_as_it_starts_ends_at_once(
    fake_index: Index, write
) -> None:
    index = fake_index
    write("a.md", A)
    writer = index.writer()
    pipeline = index.pipeline(writer, follow=True)
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(pipeline.run)
                await anyio.wait_all_tasks_blocked()  # the folder's watch is being set up
                pipeline.stop()  # a server stopped while it was still starting
    finally:
        writer.close()
        assert pipeline.converter is not None
        await pipeline.converter.aclose()
