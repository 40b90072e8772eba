"""A bounded load run: several MCP clients search one HTTP server while it indexes files
added to its folder. Used by tests/e2e/test_reliability.py (small) and scripts/reliability.py.
"""

from __future__ import annotations

import random
import statistics
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession

from support.chaos import WORDS, document
from support.mcp_harness import HttpServer, call, until


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def load_run(server: HttpServer, kb: Path, *, clients: int, searches: int,
                   files: int, seed: int = 16) -> dict[str, Any]:
    """`clients` sessions each run `searches` searches one after another while `files` new
    files land in the watched folder; latencies, errors, and how far indexing came."""
    rng = random.Random(seed)
    latencies: list[float] = []
    errors: list[str] = []
    async with AsyncExitStack() as stack:
        sessions: list[ClientSession] = [
            await stack.enter_async_context(server.session("http")) for _ in range(clients)]
        before = (await call(sessions[0], "status"))["documents"]
        for i in range(files):  # the watcher picks them up while the searches run
            (kb / f"load-{seed}-{i}.md").write_text(document(rng, f"load{seed}x{i}", 6))
        started = time.perf_counter()

        async def client(session: ClientSession, own: random.Random) -> None:
            for _ in range(searches):
                query = " ".join(own.choice(WORDS) for _ in range(3))
                began = time.perf_counter()
                try:
                    result = await session.call_tool("search", {"query": query, "top_k": 5})
                except Exception as exc:  # counted; the run goes on
                    errors.append(repr(exc)[:200])
                    continue
                latencies.append((time.perf_counter() - began) * 1000)
                if result.is_error:
                    errors.append(result.content[0].text[:200] if result.content else "error")

        async with anyio.create_task_group() as tg:
            for n, session in enumerate(sessions):
                tg.start_soon(client, session, random.Random(seed * 1000 + n))
        searching_s = time.perf_counter() - started
        indexed_meanwhile = (await call(sessions[0], "status"))["documents"] - before
        await until(lambda: call(sessions[0], "status"),
                    lambda s: s["documents"] - before >= files, seconds=600)
        ingest_s = time.perf_counter() - started
    return {
        "clients": clients, "searches": len(latencies) + len(errors), "errors": len(errors),
        "error_samples": errors[:3],
        "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "searching_s": round(searching_s, 2), "files_added": files,
        "files_indexed_while_searching": indexed_meanwhile,
        "all_files_indexed_s": round(ingest_s, 2),
    }
