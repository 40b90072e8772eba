"""An index records the folder it is fed from (a meta row, SQLite and Postgres alike), and a
process that reads it from elsewhere (another WATCH_DIR, or none) resolves stale marks and
file paths against that record."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp.plans import READING, serving
from pocketmcp.store.folder import FolderRecord


async def test_a_reader_elsewhere_resolves_files_against_the_recorded_folder(
        tmp_path: Path, store_env: dict[str, str]) -> None:
    config = make_config(tmp_path, {**store_env, "LIBRARY": "folder"})
    (config.watched.root / "papers").mkdir()
    (config.watched.root / "papers" / "owls.md").write_text(
        "# Owls\n\nOwls hunt at night in the forest.\n")
    (config.watched.root / "bread.md").write_text("# Bread\n\nSourdough needs a starter.\n")
    async with running(config, serving(True), embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(60):
            await rt.pipeline.scan_done.wait()
    record = config.main_place().folder()
    assert record == FolderRecord(path=str(config.watched.root.resolve()),
                                  library_from="folder", default_library="default",
                                  host=socket.gethostname())

    # Another process, told another folder (one that does not even exist) and reading only.
    elsewhere = config.fed_from(tmp_path / "nowhere")
    async with running(elsewhere, READING, embedding=fake(elsewhere)) as rt:
        assert rt.services.main.index.root == config.watched.root.resolve()
        async with Tools(rt) as tools:
            listed = (await tools("list_documents"))["documents"]
            assert sorted(d["path"] for d in listed) == ["bread.md", "papers/owls.md"]
            assert [d["stale"] for d in listed] == [False, False]
            hits = await tools.search("owls hunting at night", score_threshold=0)
            assert hits and not any(h["stale"] for h in hits)
            owls = config.watched.root / "papers" / "owls.md"
            owls.write_text("# Owls\n\nOwls hunt at night, and sleep by day.\n")
            os.utime(owls, ns=(1, 1))  # a different time whatever the clock's resolution
            listed = (await tools("list_documents"))["documents"]
            stale = {d["path"]: d["stale"] for d in listed}
            assert stale == {"bread.md": False, "papers/owls.md": True}


async def test_an_index_fed_by_tools_alone_records_no_folder(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    async with running(config, serving(False), embedding=fake(config)) as rt, Tools(rt) as t:
        await t.add(("note-1", "A note written by a client."))
    assert config.main_place().folder() is None
