"""Search latency and memory of many clients: one shared HTTP server versus a server each.

Three ways for N clients (1, 4, 16) to search one index (a copy of examples/kb):

- `http`: one `pocketmcp serve --transport http`; each client speaks Streamable HTTP to it.
- `bridge`: the same one server; each client spawns `pocketmcp` on stdio, as an editor does,
  which finds the server beside the index and relays to it (no model of its own).
- `stdio`: no shared server; each client spawns `pocketmcp` on stdio, which loads the model
  and opens the index itself (the first takes the writer lock, the others read).

All clients of a round start searching together; each runs the same queries one after the
other. Prints p50/p95 per search and the RSS of every process (from /proc, Linux only), and
writes JSON. The machine is shared: compare the modes of one run, not numbers across runs.

    .venv/bin/python bench/http_clients.py --searches 30

Results: bench/results/http_clients.json.

Figures on: docs/benchmarks.md (the clients table).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from common import (
    ROOT,
    HttpServer,
    children,
    http_server,
    ms_since,
    parser_for,
    rss_mib,
    server_env,
    stdio_session,
    summary,
    write_results,
)
from mcp import ClientSession

QUERIES = ("how do I keep a sourdough starter alive", "why are my pods unreachable",
           "what temperature for green tea", "service with a stable virtual IP",
           "feeding schedule for wild yeast", "steeping time for tea leaves")


DEVNULL = open(os.devnull, "w")  # noqa: SIM115 (the stderr of every spawned process, all run)


@asynccontextmanager
async def client(mode: str, folder: Path, db: Path, server: HttpServer | None
                 ) -> AsyncIterator[ClientSession]:
    if server is not None and mode == "http":
        async with server.session() as session:
            yield session
    else:  # a bridge relays to the server; a stdio server alone serves itself
        share = "on" if mode == "bridge" else "off"
        async with stdio_session(server_env(db, folder, SHARE=share), errlog=DEVNULL
                                 ) as session:
            yield session


async def wait_ready(session: ClientSession) -> None:
    with anyio.fail_after(180):
        while True:
            status = (await session.call_tool("status", {})).structured_content or {}
            if status.get("model_ready") and status.get("role") in ("writer", "reader"):
                return
            await anyio.sleep(0.2)


async def round_of(mode: str, n: int, searches: int, folder: Path, db: Path,
                   server: HttpServer | None) -> dict[str, Any]:
    latencies: list[float] = []
    connected = 0
    all_connected = anyio.Event()
    done = anyio.Event()
    finished = 0
    rss: dict[str, list[float]] = {"clients": []}

    async def one(i: int) -> None:
        nonlocal connected, finished
        async with client(mode, folder, db, server) as session:
            await wait_ready(session)
            await session.call_tool("search", {"query": QUERIES[i % len(QUERIES)]})  # warm
            connected += 1
            if connected == n:
                all_connected.set()
            await all_connected.wait()
            for k in range(searches):
                started = time.perf_counter()
                result = await session.call_tool(
                    "search", {"query": QUERIES[(i + k) % len(QUERIES)], "top_k": 5})
                latencies.append(ms_since(started))
                assert not result.is_error, result
            finished += 1
            if finished == n:
                rss["clients"] = [rss_mib(pid) for pid in children() if mode != "http" and (
                    server is None or pid != server.process.pid)]
                done.set()
            await done.wait()  # every process stays up until RSS is read

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return {"clients": n, "searches": len(latencies), **summary(latencies, digits=1),
            "process_rss_mib": rss["clients"]}


async def main() -> None:
    parser = parser_for(__doc__, "http_clients")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--modes", default="http,bridge,stdio")
    parser.add_argument("--searches", type=int, default=30, help="per client and round")
    args = parser.parse_args()
    sizes = [int(x) for x in args.clients.split(",")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-clients-") as tmp:
        for mode in args.modes.split(","):
            folder = Path(tmp) / mode / "kb"
            shutil.copytree(ROOT / "examples" / "kb", folder)
            db = Path(tmp) / mode / "index.db"
            with contextlib.ExitStack() as stack:
                server = None if mode == "stdio" else stack.enter_context(
                    http_server(server_env(db, folder), Path(tmp) / mode / "http.err"))
                for n in sizes:
                    row = await round_of(mode, n, args.searches, folder, db, server)
                    row["mode"] = mode
                    if server is not None:
                        row["server_rss_mib"] = rss_mib(server.process.pid)
                    results.append(row)
                    print(json.dumps(row), flush=True)
    write_results(args, {"searches": args.searches, "results": results})


if __name__ == "__main__":
    anyio.run(main)
