"""The reliability suite's short forms (the long forms: scripts/reliability.py): kill -9
during `index` and `watch`, a corpus of bad input, and several clients searching while the
server indexes. Kills during tool writes: tests/mcp/test_long_writes.py."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from support.badinput import judge, make_corpus, outcomes, summary
from support.chaos import (
    Rounds,
    check_index,
    document,
    env_for,
    index_kill_round,
    recover,
    run_index,
    watched_files,
)
from support.cli import fields
from support.load import load_run
from support.mcp_harness import start_http, stop_http
from support.processes import provider_settings
from support.provider_server import Fault, ProviderServer

from pocketmcp.commands.indexing import EXIT_PARTIAL

pytestmark = pytest.mark.usefixtures("processes")


def test_kill_9_during_index_and_watch_leaves_a_sound_index_that_recovers(
        tmp_path: Path, fake_provider: ProviderServer) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    rng = random.Random(16)
    for i in range(20):
        (kb / f"note{i}.md").write_text(document(rng, f"n{i}", rng.randint(2, 12)))
    env = env_for(tmp_path)
    # `index` embeds through a provider that never answers: it is still at work (writing
    # keywords, or waiting for vectors) when its kill comes; `watch` never ends by itself.
    fake_provider.always = Fault(hang=True)
    waiting = {**env, **provider_settings(fake_provider.url)}
    rounds = Rounds()
    for command in ("index", "watch"):
        index_kill_round(tmp_path, waiting if command == "index" else env, rng, rounds,
                         command=command, within_s=3)
        for i in rng.sample(range(20), 5):  # work for the next round to be killed in
            (kb / f"note{i}.md").write_text(document(rng, f"n{i}r", rng.randint(2, 12)))
    recover(tmp_path, env, rounds, timeout_s=300)
    assert not rounds.failures, rounds.failures
    assert rounds.counts["killed"] == 2 and rounds.counts["finished_first"] == 0  # both landed
    assert rounds.counts["rounds_ok"] == 3 and rounds.counts["recoveries_ok"] == 1
    assert rounds.counts["recovered_files"] == 20


def test_every_bad_file_ends_indexed_or_skipped_with_a_reason(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    expected = make_corpus(kb, full=False, max_file_bytes=1024 * 1024)
    # Small limits keep the run short: every file is cut at 10 chunks.
    env = env_for(tmp_path, MAX_FILE_MB="1", CONVERT_TIMEOUT_S="5",
                  **fields(pipeline={"max_chunks_per_doc": 10}))
    started = time.monotonic()
    code, result, lines = run_index(tmp_path, env, timeout_s=240)
    elapsed = time.monotonic() - started
    assert code == EXIT_PARTIAL, lines[-5:]  # indexed, with the bad files skipped
    db = tmp_path / "data" / "index.db"
    found = outcomes(lines, watched_files(db))
    assert not judge(expected, found), judge(expected, found)
    counts = summary(expected, found)
    assert counts["indexed"] >= 11 and counts["skipped"] >= 5, counts
    assert counts["not_followed"] == 2
    assert check_index(db).ok
    assert elapsed < 240 and result["files_seen"] >= len(expected) - 2


async def test_clients_searching_while_the_server_indexes_see_no_errors(
        tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    rng = random.Random(7)
    for i in range(5):
        (tmp_path / "kb" / f"seed{i}.md").write_text(document(rng, f"s{i}", 4))
    server = start_http(tmp_path)
    try:
        figures = await load_run(server, tmp_path / "kb", clients=3, searches=8, files=6)
    finally:
        assert stop_http(server) == 0, server.stderr()[-3000:]
    assert figures["errors"] == 0, figures
    assert figures["searches"] == 24 and figures["p95_ms"] > 0
