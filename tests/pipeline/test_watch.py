"""Watching a live folder with the real watcher and index (and the deterministic embedder:
what is watched here is the folder, not what its words mean)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
from support.index import Watching

A = "# Gardening\n\nTomatoes need full sun and deep watering twice a week.\n"
B = "# Astronomy\n\nJupiter's moon Europa hides an ocean under its ice shell.\n"


def _is(kind: str, path: str):
    return lambda e: e["event"] == kind and e["path"] == path


async def test_new_edited_and_deleted_files_are_followed(watching: Watching, write) -> None:
    write("a.md", A)
    await watching.wait_for(_is("inserted", "a.md"))
    write("b.md", B)
    await watching.wait_for(_is("inserted", "b.md"))
    await watching.wait_for(_is("embedded", "b.md"))  # its vectors follow its keywords
    assert watching.index.search("ocean under ice on a moon")[0] == "b.md"
    write("a.md", A + "\nBasil grows well next to tomatoes.\n")
    event = await watching.wait_for(_is("updated", "a.md"))
    assert event["chunks"] == 1
    (watching.index.kb / "b.md").unlink()
    await watching.wait_for(_is("deleted", "b.md"))
    assert watching.index.search("ocean under ice on a moon") == ["a.md"]


async def test_a_save_without_change_is_skipped(watching: Watching, write) -> None:
    write("a.md", A)
    await watching.wait_for(_is("embedded", "a.md"))
    watching.index.embedded.clear()
    write("a.md", A)
    await watching.wait_for(_is("skipped", "a.md"))
    assert watching.index.embedded == []


async def test_an_atomic_save_by_rename_is_an_update(watching: Watching, write) -> None:
    write("a.md", A)
    await watching.wait_for(_is("inserted", "a.md"))
    tmp = write("a.md.tmp", A + "\nPeppers like heat.\n")
    os.replace(tmp, watching.index.kb / "a.md")
    await watching.wait_for(_is("updated", "a.md"))
    assert "Peppers" in watching.index.text_of("a.md")


async def test_files_created_inside_a_new_folder_are_found(
    watching: Watching, tmp_path: Path
) -> None:
    staging = tmp_path / "staging" / "deep" / "er"
    staging.mkdir(parents=True)
    (staging / "c.md").write_text(B)
    (staging / "d.txt").write_text(A)
    # The whole tree appears at once: no event is ever sent for the files inside it.
    shutil.move(str(tmp_path / "staging"), str(watching.index.kb / "new"))
    await watching.wait_for(_is("inserted", "new/deep/er/c.md"))
    await watching.wait_for(_is("inserted", "new/deep/er/d.txt"))


async def test_a_folder_moved_away_takes_its_files_out(
    watching: Watching, write, tmp_path: Path
) -> None:
    write("sub/a.md", A)
    write("sub/b.md", B)
    await watching.wait_for(_is("inserted", "sub/b.md"))
    shutil.move(str(watching.index.kb / "sub"), str(tmp_path / "elsewhere"))
    await watching.wait_for(_is("deleted", "sub/a.md"))
    await watching.wait_for(_is("deleted", "sub/b.md"))


async def test_temp_files_are_ignored(watching: Watching, write) -> None:
    write("~$lock.md", A)
    write("draft.md.swp", A)
    write(".hidden/x.md", A)
    write("4913", A)
    write("real.md", B)
    await watching.wait_for(_is("inserted", "real.md"))
    assert {e["path"] for e in watching.index.events} == {"real.md"}


async def test_stopping_drains_work_in_flight(watching: Watching, write) -> None:
    for i in range(20):
        write(f"n{i}.md", f"# Note {i}\n\nFact number {i} about lighthouses.\n")
    await watching.wait_for(lambda e: e["event"] == "inserted")
    watching.pipeline.stop()
    with anyio.fail_after(20):
        await watching.done.wait()
    # Everything that entered the pipeline was committed before run() returned.
    assert len(watching.pipeline.inflight) == 0
    committed = watching.index.documents()
    assert len(committed) == watching.pipeline.stats.added >= 1
    # And a later pass completes the folder.
    watching.writer.close()
    await watching.index.index_once()
    assert len(watching.index.search("lighthouses", k=50)) == 20
