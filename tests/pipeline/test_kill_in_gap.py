"""kill -9 between a note's keywords and its vectors: the real server process is killed while
its chunks wait for vectors, and the next run embeds exactly those, none twice, none lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.chaos import check_index, env_for, run_index

from pocketmcp.store.sqlite.connect import open_sync_reader

NOTES = 240
WORDS = ["otter", "heron", "lichen", "basalt", "quartz", "fjord", "tundra", "mango", "cedar",
         "walrus", "comet", "prism", "saffron", "glacier", "falcon", "sequoia"]


def _note(i: int) -> str:
    words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(10))
    return f"# Note {i}\n\nMarker m{i:04}x names this note. {words}.\n"


def _counts(db: Path) -> tuple[int, int, int, int]:
    """(documents, chunks, chunks waiting, vectors) as committed."""
    conn = open_sync_reader(db)
    try:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
            "(SELECT count(*) FROM chunks WHERE waiting = 1), "
            "(SELECT count(*) FROM vec_chunks)").fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])
    except Exception:  # not made yet, or not migrated yet
        return 0, 0, 0, 0
    finally:
        conn.close()


def _pg_counts(url: str, schema: str) -> Callable[[], tuple[int, int, int, int]]:
    def counts() -> tuple[int, int, int, int]:
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    f'SELECT (SELECT count(*) FROM "{schema}".documents), (SELECT count(*) '
                    f'FROM "{schema}".chunks), (SELECT count(*) FROM "{schema}".chunks WHERE '
                    f'embedding IS NULL), (SELECT count(*) FROM "{schema}".chunks WHERE '
                    'embedding IS NOT NULL)'.encode()).fetchone()
        except psycopg.Error:  # not made yet
            return 0, 0, 0, 0
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])
    return counts


@pytest.mark.usefixtures("processes")
def test_kill_9_in_the_gap_then_a_restart_completes_the_vectors_once(tmp_path: Path) -> None:
    db = tmp_path / "data" / "index.db"
    chunks = _kill_in_the_gap_and_restart(tmp_path, env_for(tmp_path),
                                          lambda: _counts(db) if db.exists() else (0, 0, 0, 0),
                                          check=lambda: check_index(db).ok)
    conn = open_sync_reader(db)
    try:
        # The chunk log that vector files follow names each live chunk once.
        live = conn.execute(
            "SELECT count(*) FROM (SELECT chunk_id, sum(CASE added WHEN 1 THEN 1 ELSE -1 END) "
            "AS n FROM chunk_log GROUP BY chunk_id) WHERE n = 1").fetchone()[0]
        assert live == chunks
    finally:
        conn.close()


@pytest.mark.usefixtures("processes")
def test_kill_9_in_the_gap_on_postgres(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    env = env_for(tmp_path, STORE="postgres", DATABASE_URL=pg_url, PG_SCHEMA=pg_schema)
    _kill_in_the_gap_and_restart(tmp_path, env, _pg_counts(pg_url, pg_schema))


def _kill_in_the_gap_and_restart(tmp_path: Path, env: dict[str, str],
                                 counts: Callable[[], tuple[int, int, int, int]],
                                 check: Callable[[], bool] = lambda: True) -> int:
    """`watch` killed with SIGKILL while chunks wait for vectors, then `index`: every vector
    is there once; the number of chunks."""
    kb = tmp_path / "kb"
    kb.mkdir()
    for i in range(NOTES):
        (kb / f"n{i:04}.md").write_text(_note(i))
    with open(tmp_path / "watch.err", "wb") as errlog:
        process = subprocess.Popen([sys.executable, "-m", "pocketmcp", "watch"], env=env,
                                   cwd=tmp_path, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        deadline = time.monotonic() + 240
        while True:  # until every note is keyword-searchable and some, not all, have vectors
            assert process.poll() is None, (tmp_path / "watch.err").read_text()[-2000:]
            assert time.monotonic() < deadline, "the gap was never seen"
            docs, chunks, waiting, vectors = counts()
            if docs == NOTES and 0 < waiting < chunks and vectors > 0:
                break
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    docs, chunks, waiting, vectors = counts()
    assert docs == NOTES and waiting > 0 and vectors == chunks - waiting
    assert check()  # nothing half-written by the kill
    code, summary, lines = run_index(tmp_path, env, 240)
    assert code == 0, lines[-10:]
    # No file read again: the chunks that waited were found in the index and embedded.
    assert (summary["unchanged"], summary["added"], summary["updated"]) == (NOTES, 0, 0)
    assert summary["chunks_vectors"] == summary["chunks_embedded"] == waiting
    assert summary["chunks_waiting"] == 0
    assert counts() == (NOTES, chunks, 0, chunks)  # none lost, none twice
    assert check()
    return chunks
