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
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from common import ROOT, add_result_args, children, memory_mib, ms_since, summary, write_results
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

QUERIES = ("how do I keep a sourdough starter alive", "why are my pods unreachable",
           "what temperature for green tea", "service with a stable virtual IP",
           "feeding schedule for wild yeast", "steeping time for tea leaves")


DEVNULL = open(os.devnull, "w")  # noqa: SIM115 (the stderr of every spawned process, all run)


def rss_mib(pid: int) -> float:
    return memory_mib(pid).get("VmRSS", 0.0)


def env_for(folder: Path, db: Path, share: str = "on") -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
            "WATCH_DIR": str(folder), "SQLITE_PATH": str(db), "LOG_LEVEL": "warning",
            "SHARE": share}


def start_server(folder: Path, db: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--port", "0"],
        env=env_for(folder, db), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    published = db.with_name(db.name + ".server.json")
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None and time.monotonic() < deadline, "server did not start"
        if published.exists():
            url = json.loads(published.read_text())["url"]
            try:
                if httpx2.get(url + "/health/ready", trust_env=False).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
        time.sleep(0.1)
    token = db.with_name(db.name + ".token").read_text().strip()
    return process, url, token


@asynccontextmanager
async def client(mode: str, folder: Path, db: Path, url: str, token: str
                 ) -> AsyncIterator[ClientSession]:
    async with AsyncExitStack() as stack:
        if mode == "http":
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"}, trust_env=False,
                timeout=httpx2.Timeout(30, read=300)))
            read, write = await stack.enter_async_context(
                streamable_http_client(url + "/mcp", http_client=http))
        else:
            # A bridge relays to the server; a stdio server alone serves itself.
            share = "on" if mode == "bridge" else "off"
            params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp"],
                                           env=env_for(folder, db, share))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=DEVNULL))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


async def wait_ready(session: ClientSession) -> None:
    with anyio.fail_after(180):
        while True:
            status = (await session.call_tool("status", {})).structured_content or {}
            if status.get("model_ready") and status.get("role") in ("writer", "reader"):
                return
            await anyio.sleep(0.2)


async def round_of(mode: str, n: int, searches: int, folder: Path, db: Path, url: str,
                   token: str, server_pid: int | None) -> dict[str, Any]:
    latencies: list[float] = []
    connected = 0
    all_connected = anyio.Event()
    done = anyio.Event()
    finished = 0
    rss: dict[str, list[float]] = {"clients": []}

    async def one(i: int) -> None:
        nonlocal connected, finished
        async with client(mode, folder, db, url, token) as session:
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
                rss["clients"] = [rss_mib(pid) for pid in children()
                                  if mode != "http" and pid != server_pid]
                done.set()
            await done.wait()  # every process stays up until RSS is read

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return {"clients": n, "searches": len(latencies), **summary(latencies, digits=1),
            "process_rss_mib": rss["clients"]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--modes", default="http,bridge,stdio")
    parser.add_argument("--searches", type=int, default=30, help="per client and round")
    add_result_args(parser, "http_clients")
    args = parser.parse_args()
    sizes = [int(x) for x in args.clients.split(",")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-clients-") as tmp:
        for mode in args.modes.split(","):
            folder = Path(tmp) / mode / "kb"
            shutil.copytree(ROOT / "examples" / "kb", folder)
            db = Path(tmp) / mode / "index.db"
            server = None
            url = token = ""
            if mode != "stdio":
                server, url, token = start_server(folder, db)
            try:
                for n in sizes:
                    row = await round_of(mode, n, args.searches, folder, db, url, token,
                                         server.pid if server is not None else None)
                    row["mode"] = mode
                    if server is not None:
                        row["server_rss_mib"] = rss_mib(server.pid)
                    results.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                if server is not None:
                    server.send_signal(signal.SIGTERM)
                    server.wait(30)
    write_results(args, {"searches": args.searches, "results": results})


if __name__ == "__main__":
    anyio.run(main)
