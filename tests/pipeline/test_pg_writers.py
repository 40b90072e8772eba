"""Two PocketMCP processes index one shared folder into one Postgres index at the same time:
each runs its own writer actor; per-document locks keep every document once, whole."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.cli import command_for, fields


@pytest.mark.usefixtures("processes")
def test_two_writer_processes_on_one_folder_neither_duplicate_nor_lose_a_document(
        tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    import psycopg  # an optional dependency, installed for the tests

    kb = tmp_path / "kb"
    kb.mkdir()
    files = 24
    for i in range(files):
        (kb / f"note-{i:02}.md").write_text(
            f"# Note {i}\n\nParagraph one of note {i} about topic {i % 5}.\n\n"
            f"Paragraph two of note {i}, with more words about item {i}.\n", encoding="utf-8")
    env = {**os.environ, "STORE": "postgres", "DATABASE_URL": pg_url, "PG_SCHEMA": pg_schema,
           "WATCH_DIR": str(kb), "SQLITE_PATH": str(tmp_path / "unused.db"),
           "LOG_LEVEL": "info", **fields(pipeline={"write_batch_files": 64})}
    command = [*command_for(env), "index", "--json", "--progress", "off"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=240) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(s["added"] for s in summaries) == files  # each inserted by one of them
    assert [s["skipped"] for s in summaries] == [0, 0]
    for _, err in outputs:  # no write failed (a failed one is logged, and its file skipped)
        assert "cannot be stored" not in err and "write_retry" not in err, err[-2000:]
    with psycopg.connect(pg_url, autocommit=True,
                         options=f"-c search_path={pg_schema},public") as conn:
        docs = conn.execute(b"SELECT external_id, doc_id, chunk_count FROM documents "
                            b"ORDER BY external_id").fetchall()
        chunks = dict(conn.execute(b"SELECT doc_id, count(*) FROM chunks "
                                   b"GROUP BY doc_id").fetchall())
        spans = conn.execute(b"SELECT count(*) FROM chunks c JOIN documents d USING (doc_id) "
                             b"WHERE c.idx >= d.chunk_count").fetchone()
    assert [d[0] for d in docs] == [f"file:note-{i:02}.md" for i in range(files)]
    assert all(chunks.get(doc_id) == count and count > 0 for _, doc_id, count in docs)
    assert spans == (0,)
