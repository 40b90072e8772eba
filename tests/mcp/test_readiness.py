"""Readiness means the same in every process on one index: a read-only server reports the
first scan done when the writer holding the lock has finished it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.mcp_harness import call, mcp_session, until

pytestmark = pytest.mark.usefixtures("processes")


async def test_a_second_server_reports_the_first_scan_done_once_the_writer_has_finished(
    tmp_path: Path
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(5):
        (kb / f"note{i}.md").write_text(f"# Note {i}\n\nPelicans number {i} fish today.\n")
    async with mcp_session(tmp_path, stderr_name="writer.err") as writer, mcp_session(
        tmp_path, stderr_name="reader.err"
    ) as reader:
        mine = await until(lambda: call(writer, "status"), lambda s: s["role"] != "pending")
        theirs = await until(lambda: call(reader, "status"), lambda s: s["role"] != "pending")
        assert sorted([mine["role"], theirs["role"]]) == ["reader", "writer"]
        if mine["role"] == "reader":
            writer, reader = reader, writer
        done = await until(lambda: call(writer, "status"),
                           lambda s: s["initial_indexing_done"], seconds=60)
        assert done["documents"] == 5
        seen = await until(lambda: call(reader, "status"),
                           lambda s: s["initial_indexing_done"], seconds=30)
        assert seen["role"] == "reader" and seen["phase"] == "ready"
        assert seen["documents"] == 5
