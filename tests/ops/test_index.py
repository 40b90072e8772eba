"""The index as a whole: status, and reindex without a watched folder, in process."""

from __future__ import annotations

from support.tools import Tools, refused

from pocketmcp.errors import InvalidRequest


async def test_status_says_what_this_process_serves(tools: Tools) -> None:
    await tools.add(("a", "One note."), ("b", "Another note."))
    status = await tools("status")
    assert (status["phase"], status["role"], status["model_ready"]) == ("ready", "writer", True)
    assert (status["documents"], status["chunks"], status["dimensions"]) == (2, 2, 384)
    assert status["watch_dir"] is None and status["queue_depths"]["writer"]["max"] >= 1
    assert status["model"] == "sentence-transformers/all-MiniLM-L6-v2"


async def test_reindex_without_a_watched_folder_says_how_to_get_one(fake_tools: Tools) -> None:
    tools = fake_tools
    with refused(InvalidRequest, match="WATCH_DIR"):
        await tools("reindex")
