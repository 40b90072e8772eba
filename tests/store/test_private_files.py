"""An index is its owner's alone: the folders PocketMCP makes for it are 0700 and its files
0600 (the database with its -wal and -shm, the vector file, the writer lock, the OCR cache,
the search tuning and the server log), whatever the umask; an index others may read is
logged once when its writer opens, with the command that narrows it. Real files and modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from support.runtime import fake, make_config, running
from support.tools import Tools

from pocketmcp import private
from pocketmcp.commands import doctor
from pocketmcp.convert.kinds import Converted
from pocketmcp.convert.limits import OcrLimits
from pocketmcp.convert.ocrcache import OcrCache
from pocketmcp.search import tuning


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_index_is_made_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask: 0755 folders and 0644 files unless asked
    try:
        config = make_config(tmp_path, env={"SQLITE_PATH": str(tmp_path / "a" / "b" /
                                                               "index.db")})
        async with running(config, embedding=fake(config)) as rt:
            await Tools(rt).add(("doc", "Otters hold hands while they sleep."))
            db = tmp_path / "a" / "b" / "index.db"
            tuning.save_weight((await rt.reading()).index, 0.4)
            cache = OcrCache(config.main_place().beside("ocr"), OcrLimits(), "test")
            await cache.put(cache.key("pdf", "0" * 64), Converted(text="read"))
            files = config.main_place().own_files()
            names = {p.name for p in files}
            assert {"index.db", "index.db-wal", "index.db-shm", "index.db.vectors",
                    "index.db.writer.lock", "index.db.search.json", "index.db.ocr"} <= names
            for path in files:
                assert _mode(path) == (0o700 if path.is_dir() else 0o600), path
            for folder in (tmp_path / "a", db.parent, *db.with_name("index.db.ocr").iterdir()):
                assert _mode(folder) == 0o700, folder
            log = config.main_place().beside("server.log")
            private.file(log)
            assert _mode(log) == 0o600
            assert private.exposed(files) == []
    finally:
        os.umask(old)


async def test_an_index_others_can_read_is_logged_once_and_doctor_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config(tmp_path)
    async with running(config, embedding=fake(config)) as rt:
        await Tools(rt).add(("doc", "Herons stand still for hours."))
    db = tmp_path / "data" / "index.db"
    os.chmod(db, 0o644)
    os.chmod(db.parent, 0o755)
    with capture_logs() as logged:
        async with running(config, embedding=fake(config)):
            pass
    found = [e for e in logged if e["event"] == "index_readable_by_others"]
    assert len(found) == 1, found
    assert found[0]["paths"] == [str(db)]
    assert found[0]["fix"] == f"chmod 600 {db}"
    report = doctor.Report()
    await doctor._check_index(config, report, None, None, LookupError("not compared here"))
    said = capsys.readouterr().out
    assert f"warn  index {db}: other users of this machine may read {db}" in said, said
    assert f"-> `chmod 600 {db}`" in said
    os.chmod(db, 0o600)
    with capture_logs() as logged:
        async with running(config, embedding=fake(config)):
            pass
    assert not [e for e in logged if e["event"] == "index_readable_by_others"]
