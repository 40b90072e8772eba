"""Long writes through tools: progress for a client that asks, limits that name themselves,
and nothing acknowledged lost when the client goes away."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.chaos import Rounds, document, env_for, tool_write_round
from support.cli import fields
from support.mcp_harness import call, code_of, mcp_session, tool_error

pytestmark = pytest.mark.usefixtures("processes")


async def test_an_upsert_reports_progress_of_its_chunks_then_its_commit(tmp_path: Path) -> None:
    text = document(random.Random(1), "progress", 30)
    async with mcp_session(tmp_path, **fields(embed={"batch_size": 4})) as session:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            seen.append((done, total, message))

        result = await session.call_tool("upsert_documents", {"docs": [
            {"external_id": "long", "text": text}]}, progress_callback=on_progress)
        assert not result.is_error, result.content
        chunks = result.structured_content["results"][0]["chunks"]  # type: ignore[index]
        assert chunks >= 8
        assert len(seen) >= 3, seen
        dones = [done for done, _, _ in seen]
        assert dones == sorted(dones) and len(set(dones)) == len(dones)  # always forward
        assert {total for _, total, _ in seen} == {chunks + 1}  # each chunk, then the commit
        assert seen[-1][0] == chunks + 1 and "committed" in (seen[-1][2] or "")
        assert "chunks embedded" in (seen[0][2] or "")
        # Without a progress token nothing is sent, and the write is the same.
        again = await call(session, "upsert_documents", {"docs": [
            {"external_id": "long", "text": text}]})
        assert again["results"][0]["status"] == "unchanged"


async def test_texts_over_the_limits_are_refused_with_the_limit_named(tmp_path: Path) -> None:
    async with mcp_session(tmp_path, MAX_FILE_MB="1",
                           **fields(pipeline={"max_chunks_per_doc": 10})) as session:
        big = await tool_error(session, "upsert_documents", {"docs": [
            {"text": "x" * (1024 * 1024 + 10)}]})
        assert code_of(big) == "INVALID_REQUEST" and "MAX_FILE_MB (1048576 bytes)" in big
        many = await tool_error(session, "insert_document", {
            "text": document(random.Random(2), "many", 60)})
        assert code_of(many) == "INVALID_REQUEST" and "the most one document makes" in many
        assert "more than 10 chunks" in many


def test_a_client_that_goes_away_mid_write_loses_nothing_acknowledged(tmp_path: Path) -> None:
    rounds = Rounds()
    acknowledged: set[str] = set()
    env = env_for(tmp_path)
    rng = random.Random(16)
    tool_write_round(tmp_path, env, rng, rounds, acknowledged=acknowledged, writes=3,
                     stop="eof")
    tool_write_round(tmp_path, env, rng, rounds, acknowledged=acknowledged, writes=2,
                     stop="kill")
    assert rounds.counts["acknowledged"] == 5 and len(acknowledged) == 5
    assert rounds.counts["rounds_ok"] == 2, rounds.failures
