"""psycopg 3 against asyncpg on the same Postgres server, in one run, call by call alternating.

Three calls, each through a pool of 4 connections, as a search makes them:
- a round-trip (`SELECT 1`);
- a vector query: the 10 nearest chunks by HNSW (cosine) to a stored chunk's vector;
- a keyword query: websearch_to_tsquery of a SciFact claim, 10 chunks ranked by ts_rank_cd.
Five ways to make them: psycopg's blocking pool called in a worker thread
(anyio.to_thread, as the store does: every store call runs in a worker thread), the same
with the parameters forced to binary (`%b`; the store writes `%s`, psycopg's choice), the
same pool called directly (no thread hop), psycopg's async pool, and asyncpg's pool (the
vector type registered with pgvector's helpers on each). Each figure is from the event loop's
side: p50 / p95 in ms over `--calls` calls. asyncpg is not a dependency: install it into
the venv to run this (`pip install asyncpg`).

    .venv/bin/python bench/pg_drivers.py --url "$DATABASE_URL" --schema kwbench
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"
VECTOR = ("SELECT chunk_id, 1 - (embedding <=> {p}) FROM chunks "
          "ORDER BY embedding <=> {p} LIMIT 10")
KEYWORD = ("SELECT chunk_id, ts_rank_cd(tsv, q) AS r FROM chunks, "
           "websearch_to_tsquery('english', {p}) q WHERE tsv @@ q ORDER BY r DESC LIMIT 10")


def pct(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(url: str, schema: str, calls: int, claims: list[str]) -> dict[str, Any]:
    import asyncpg
    import psycopg
    from pgvector.asyncpg import register_vector as asyncpg_vector
    from pgvector.psycopg import register_vector, register_vector_async
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    options = f"-c search_path={schema},public"
    with psycopg.connect(url, autocommit=True, options=options) as conn:
        register_vector(conn)
        rows = conn.execute(b"SELECT embedding FROM chunks ORDER BY random() LIMIT %s",
                            (calls,)).fetchall()
    vectors = [np.asarray(r[0].to_numpy(), np.float32) for r in rows]
    sync_pool = ConnectionPool(url, min_size=4, max_size=4, open=True,
                               kwargs={"autocommit": True, "options": options},
                               configure=register_vector)
    async_pool = AsyncConnectionPool(url, min_size=4, max_size=4, open=False,
                                     kwargs={"autocommit": True, "options": options},
                                     configure=register_vector_async)
    await async_pool.open(wait=True)

    async def init(conn: Any) -> None:
        await asyncpg_vector(conn, schema="public")

    apg = await asyncpg.create_pool(url, min_size=4, max_size=4, init=init,
                                    server_settings={"search_path": f"{schema},public"})
    sync_pool.wait()

    def blocking(sql: str, arg: Any, mark: str = "%s") -> list[Any]:
        with sync_pool.connection() as conn:
            return conn.execute(sql.format(p=mark).encode(),
                                (arg,) * sql.count("{p}")).fetchall()

    async def in_thread(sql: str, arg: Any) -> list[Any]:
        return await anyio.to_thread.run_sync(blocking, sql, arg)

    async def in_thread_binary(sql: str, arg: Any) -> list[Any]:
        return await anyio.to_thread.run_sync(blocking, sql, arg, "%b")

    async def direct(sql: str, arg: Any) -> list[Any]:
        return blocking(sql, arg)

    async def psycopg_async(sql: str, arg: Any) -> list[Any]:
        async with async_pool.connection() as conn:
            n = sql.count("{p}")
            cur = await conn.execute(sql.format(p="%s").encode(), (arg,) * n)
            return await cur.fetchall()

    async def with_asyncpg(sql: str, arg: Any) -> list[Any]:
        async with apg.acquire() as conn:
            n = sql.count("{p}")
            return list(await conn.fetch(sql.format(p="$1"), *((arg,) if n else ())))

    ways: dict[str, Callable[[str, Any], Awaitable[list[Any]]]] = {
        "psycopg pool, worker thread": in_thread,
        "psycopg pool, worker thread, %b": in_thread_binary, "psycopg pool, direct": direct,
        "psycopg async pool": psycopg_async, "asyncpg pool": with_asyncpg}
    tests = {"round-trip": ("SELECT 1", [None] * calls),
             "vector, 10 nearest": (VECTOR, vectors),
             "keyword, 10 ranked": (KEYWORD, [claims[i % len(claims)] for i in range(calls)])}
    times: dict[str, dict[str, list[float]]] = {t: {w: [] for w in ways} for t in tests}
    results: dict[str, dict[str, list[Any]]] = {t: {w: [] for w in ways} for t in tests}
    order = list(ways)
    for test, (sql, args) in tests.items():
        for way in order:  # a warm-up call each
            await ways[way](sql, args[0])
        for arg in args:
            order = order[1:] + order[:1]  # each way first in turn
            for way in order:
                started = time.perf_counter()
                got = await ways[way](sql, arg)
                times[test][way].append((time.perf_counter() - started) * 1000)
                results[test][way].append([r[0] for r in got])
    await apg.close()
    await async_pool.close()
    sync_pool.close()
    out: dict[str, Any] = {}
    for test in tests:
        first = results[test][next(iter(ways))]
        out[test] = {way: {"p50_ms": round(statistics.median(t), 3),
                           "p95_ms": round(pct(t, 0.95), 3),
                           "same_results": results[test][way] == first}
                     for way, t in times[test].items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="a Postgres server's URL")
    parser.add_argument("--schema", required=True,
                        help="an index's schema (bench/pg_keywords.py makes one)")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                        "pg_drivers.json")
    args = parser.parse_args()
    import asyncpg
    import psycopg

    claims = [json.loads(line)["text"] for line in
              (args.dataset / "queries.jsonl").read_text().splitlines() if line.strip()]
    result = anyio.run(measure, args.url, args.schema, args.calls, claims)
    meta = {"calls": args.calls, "schema": args.schema, "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(), "psycopg": psycopg.__version__,
            "asyncpg": asyncpg.__version__}
    for test, ways in result.items():
        for way, row in ways.items():
            print(f"{test:20} {way:32} p50 {row['p50_ms']:7.3f}  p95 {row['p95_ms']:7.3f} ms"
                  f"{'' if row['same_results'] else '  (other results)'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**meta, "results": result}, indent=1) + "\n")
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
