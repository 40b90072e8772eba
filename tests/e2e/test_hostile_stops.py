"""Stops and deadlines: an interrupted `index` says so in its exit code and names the files
it left; a search that runs too long answers DEADLINE_EXCEEDED; a hostile search neither
blocks /health nor shutdown. Real processes, real signals.

What these tests bound in time they bound generously (a machine busy with other work is
slow), and what they assert of behaviour they show by events (the answer came while the
provider still held the query's embedding). The aims in seconds (a stop within 5 s, /health
at once) are not timed here: timings belong in bench/ and scripts/reliability.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx2
import pytest
from support.cli import command_for, fields, run_cli
from support.mcp_harness import STOP_BOUND_S, start_http, stop_http
from support.processes import provider_settings
from support.protocol_fuzz import HttpPeer
from support.provider_server import Fault, ProviderServer
from support.runtime import provider_embedding, remote_config, running
from support.tools import Tools

from pocketmcp.store.sqlite.connect import open_sync_reader

NOTES = 60


def _folder(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    kb.mkdir()
    words = " ".join(["otter heron lichen basalt quartz fjord"] * 25)
    for i in range(NOTES):
        (kb / f"n{i:03d}.md").write_text(f"# Note {i}\n\n{words} {i}\n")
    return kb


def _committed(db: Path) -> int:
    """Documents the index at `db` holds (0 while it cannot be read yet)."""
    if not db.exists():
        return 0
    try:
        conn = open_sync_reader(db)
    except Exception:  # being made: not readable yet
        return 0
    try:
        return int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
    except Exception:
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.usefixtures("processes")
def test_an_interrupted_index_exits_with_the_signal_and_names_what_it_left(
        tmp_path: Path, sig: signal.Signals, code: int, fake_provider: ProviderServer) -> None:
    kb = _folder(tmp_path)
    # A provider of its own, slow to answer, in requests of five texts: the signal comes
    # while indexing is under way, and the batch at hand when it lands leaves most vectors
    # to do (one request for every note could otherwise be the batch at hand).
    fake_provider.always = Fault(delay_s=2)
    provider = provider_settings(fake_provider.url)
    env = {**os.environ, **provider, "SQLITE_PATH": str(tmp_path / "idx" / "index.db"),
           "WATCH_DIR": str(kb), **fields(embed={"batch_size": 5})}
    db = tmp_path / "idx" / "index.db"
    with open(tmp_path / "index.err", "w") as errors:
        process = subprocess.Popen([*command_for(env), "index", "--json"],
                                   env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                   stderr=errors, text=True)
    deadline = time.monotonic() + 120
    while _committed(db) < 3:  # a few files committed: indexing is under way
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(sig)
    sent = time.monotonic()
    out, _ = process.communicate(timeout=60)
    err = (tmp_path / "index.err").read_text()
    took = time.monotonic() - sent
    assert process.returncode == code, err[-2000:]
    assert took < STOP_BOUND_S, took
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted_by"] == sig.name
    left = summary["unfinished_files"]
    # Stopped before the end: files not yet written, or (keywords are written first, so a
    # signal can land after the last file is in) chunks still waiting for their vectors.
    assert left or summary["chunks_waiting"] > 0, summary
    assert summary["added"] + len(left) == NOTES, summary
    fake_provider.always = None
    again = run_cli(tmp_path, "index", "--json", env=provider)
    assert again.returncode == 0, again.stderr[-2000:]
    done = json.loads(again.stdout)
    assert done["added"] == len(left) and done["unchanged"] == summary["added"]
    assert done["chunks_waiting"] == 0, done  # the next run completes the vectors too
    reader = open_sync_reader(db)
    try:
        chunks, covered = reader.execute(
            "SELECT count(*), count(*) FILTER (WHERE chunk_id IN "
            "(SELECT chunk_id FROM vec_chunks)) FROM chunks").fetchone()
        vectors = reader.execute("SELECT count(*) FROM vec_chunks").fetchone()[0]
    finally:
        reader.close()
    # One chunk a note, each with its vector, none twice.
    assert chunks == covered == vectors == NOTES, (chunks, covered, vectors)


@pytest.mark.parametrize("call", [{"name": "search", "query": "sourdough bread"},
                                  {"name": "find_similar_documents", "text": "sourdough bread"}])
async def test_a_query_the_provider_does_not_embed_answers_by_keywords_in_time(
        tmp_path: Path, fake_provider: ProviderServer, call: dict[str, str]) -> None:
    # The provider stops answering the query's embedding: the search gives it half the
    # time it has, then answers with keyword results and says why, inside SEARCH_TIMEOUT_S
    # (past it, the call would fail with DEADLINE_EXCEEDED: an answer is in time).
    config = remote_config(tmp_path, fake_provider, {"SEARCH_TIMEOUT_S": "0.8"})
    async with running(config, embedding=provider_embedding(config)) as rt:
        tools = Tools(rt)
        await tools.add(("bread", "Sourdough bread rises overnight."),
                        ("tea", "Green tea brews at eighty degrees."))
        fake_provider.always = Fault(hang=True)
        call = dict(call)
        name = call.pop("name")
        started = time.perf_counter()
        answer = await tools(name, **call)
        assert time.perf_counter() - started < 30  # a hang bound: answered, not left waiting
        assert fake_provider.in_flight == 1  # while the query's embedding still hangs
        assert "no embedding within" in answer["notice"]
        found = answer.get("matches") or answer.get("results")
        assert found and "Sourdough" in (found[0].get("preview") or found[0]["text"])
        fake_provider.release.set()


async def test_a_search_past_its_deadline_answers_deadline_exceeded(
        tmp_path: Path, fake_provider: ProviderServer) -> None:
    # A search that may not answer by keywords alone (as `eval` and `check-search` ask)
    # waits for the query's embedding until SEARCH_TIMEOUT_S, then stops.
    config = remote_config(tmp_path, fake_provider, {"SEARCH_TIMEOUT_S": "0.5"})
    async with running(config, embedding=provider_embedding(config)) as rt:
        tools = Tools(rt)
        await tools.add(*[(f"note-{i}", f"Note {i} about bread.") for i in range(64)])
        fake_provider.always = Fault(hang=True)
        from pocketmcp.errors import DeadlineExceeded
        from pocketmcp.search.run import search

        started = time.perf_counter()
        with pytest.raises(DeadlineExceeded, match="SEARCH_TIMEOUT_S"):
            await search(await rt.reading(), "bread", fallback=False)
        assert time.perf_counter() - started < 30  # a hang bound: stopped, not left waiting
        assert fake_provider.in_flight == 1  # stopped while the embedding still hangs
        # the runtime goes on answering
        assert (await tools("status"))["documents"] == 64
        fake_provider.release.set()


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("processes")
def test_a_hostile_search_blocks_neither_health_nor_shutdown(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    deep = tmp_path / "kb" / ("a" * 120) / ("a" * 120)
    deep.mkdir(parents=True)
    for i in range(5):
        (deep / f"{'a' * 100}{i}.md").write_text(f"# Bread {i}\n\nSourdough bread {i}.\n")
    server = start_http(tmp_path)
    try:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "bread",
                                            "filter": {"path_glob": "*a" * 14 + "b"}}}}
        answers: list[float] = []

        def hostile(posting: threading.Event, stopping: bool = False) -> None:
            peer = HttpPeer(server.url, server.token)
            try:
                peer.handshake()
                started = time.monotonic()
                posting.set()
                peer.client.post("/mcp", headers=peer.headers, json=call, timeout=120)
                answers.append(time.monotonic() - started)
            except httpx2.TransportError:
                if not stopping:  # a search cut by the shutdown may lose its connection
                    raise
            finally:
                peer.close()

        posting = [threading.Event() for _ in range(3)]
        workers = [threading.Thread(target=hostile, args=(p,), daemon=True) for p in posting]
        for worker in workers:
            worker.start()
        worst = 0.0
        for _ in range(10):  # /health answers at once while the searches run
            started = time.monotonic()
            health = httpx2.get(server.url + "/health", trust_env=False, timeout=5)
            worst = max(worst, time.monotonic() - started)
            assert health.status_code == 200
            time.sleep(0.1)
        assert worst < 5, worst  # not held up behind the searches (generous: a busy machine)
        for worker in workers:
            worker.join(30)
        assert len(answers) == 3 and max(answers) < 30, answers
        # shutdown (the aim: within 5 s) while the same searches are running again
        posting = [threading.Event() for _ in range(3)]
        workers = [threading.Thread(target=hostile, args=(p, True), daemon=True)
                   for p in posting]
        for worker in workers:
            worker.start()
        assert all(p.wait(30) for p in posting), "the searches were not sent"
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(30)
        assert time.monotonic() - started < STOP_BOUND_S
    finally:
        stop_http(server)
