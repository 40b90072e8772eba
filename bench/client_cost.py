"""What a search call costs through stdio, with the python-sdk client and with a minimal one.

A call measured through the python-sdk client includes that client's own work: parsing the
reply into pydantic models and checking its structured content against the tool's output
schema (jsonschema). Editors run other clients. So each round spawns `python -m pocketmcp`
on an index twice, one after the other in alternating order: once driven by the python-sdk
client, once by a minimal JSON-RPC client (one line written, lines read until the reply
with its id: the server's share and the pipes, nothing else). Both ask the same new SciFact
queries (hybrid search, top 10 with no score threshold, the query embedding included)
once the MCP SDK has the session (the server's stdio front answers the first seconds'
searches while the SDK is imported; its log says `sdk_up` when the SDK has taken over) and
after a warm-up of 20 others; per client it reports p50/p95 of every call over all rounds
and the median reply size, and it checks that both got the same chunks in the same order.

    .venv/bin/python bench/client_cost.py --index ../benchdata/search-50000.db --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"
WARM = 20  # calls before the measured ones
SDK_WAIT_S = 15.0  # the SDK takes over 5 s after start at the latest (mcp/front.py)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def environment(db: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
           "SQLITE_PATH": str(db), "LOG_LEVEL": "debug"}
    if "POCKETMCP_CACHE" in os.environ:
        env["POCKETMCP_CACHE"] = os.environ["POCKETMCP_CACHE"]
    return env


def sdk_has_session(log: Path) -> bool:
    """Whether the server's log (its stderr) says the SDK answers now: `sdk_up`, or no
    stdio front at all."""
    text = log.read_text(encoding="utf-8", errors="replace")
    return '"sdk_up"' in text or ('"serving"' in text and '"front_up"' not in text)


def wait_for_sdk(log: Path) -> None:
    deadline = time.monotonic() + SDK_WAIT_S
    while not sdk_has_session(log):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the SDK did not take over within {SDK_WAIT_S} s")
        time.sleep(0.05)


def arguments(query: str) -> dict[str, Any]:
    """A hybrid search for the 10 best, none dropped by score (so every reply is full)."""
    return {"query": query, "top_k": 10, "score_threshold": 0}


def chunk_ids(structured: dict[str, Any]) -> list[int]:
    """The chunks a search answered with, in order (a bench query always finds some)."""
    ids = [int(m["chunk_id"]) for m in structured.get("matches", [])]
    if not ids:
        raise RuntimeError(f"a search found nothing: {structured}")
    return ids


def minimal(db: Path, warm: list[str], queries: list[str]) -> dict[str, Any]:
    """Calls by a bare JSON-RPC client over the server's stdin and stdout."""
    with tempfile.TemporaryDirectory(prefix="pocketmcp-client-") as cwd, open(
            Path(cwd) / "server.log", "w") as errlog:
        server = subprocess.Popen([sys.executable, "-m", "pocketmcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=errlog,
                                  env=environment(db), cwd=cwd)
        assert server.stdin is not None and server.stdout is not None
        stdin, stdout = server.stdin, server.stdout
        last = 0

        def ask(method: str, params: dict[str, Any], *, reply: bool = True) -> Any:
            nonlocal last
            message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
            if reply:
                last += 1
                message["id"] = last
            stdin.write((json.dumps(message) + "\n").encode())
            stdin.flush()
            while reply:
                line = stdout.readline()
                if not line:
                    raise RuntimeError("the server closed its output")
                answer = json.loads(line)
                if answer.get("id") == last:
                    if "error" in answer:
                        raise RuntimeError(answer["error"])
                    return answer["result"], len(line)
            return None

        try:
            ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "bench", "version": "0"}})
            ask("notifications/initialized", {}, reply=False)
            wait_for_sdk(Path(cwd) / "server.log")
            times, sizes, found = [], [], []
            for i, query in enumerate([*warm, *queries]):
                started = time.perf_counter()
                result, size = ask("tools/call", {"name": "search",
                                                  "arguments": arguments(query)})
                ms = (time.perf_counter() - started) * 1000
                assert not result.get("isError"), result
                if i >= len(warm):
                    times.append(ms)
                    sizes.append(size)
                    found.append(chunk_ids(result["structuredContent"]))
        finally:
            server.kill()
            server.wait()
    return {"times": times, "sizes": sizes, "found": found}


async def sdk(db: Path, warm: list[str], queries: list[str]) -> dict[str, Any]:
    """Calls by the python-sdk client."""
    with tempfile.TemporaryDirectory(prefix="pocketmcp-client-") as cwd:
        params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp"],
                                       env=environment(db), cwd=cwd)
        log = Path(cwd) / "server.log"
        with open(log, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
                read, write
            ) as session:
                await session.initialize()
                await anyio.to_thread.run_sync(wait_for_sdk, log)
                await session.list_tools()
                times, found = [], []
                for i, query in enumerate([*warm, *queries]):
                    started = time.perf_counter()
                    result = await session.call_tool("search", arguments(query))
                    ms = (time.perf_counter() - started) * 1000
                    assert not result.is_error, result.content
                    if i >= len(warm):
                        times.append(ms)
                        found.append(chunk_ids(result.structured_content or {}))
    return {"times": times, "found": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=100, help="measured calls a round")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in
             (DATASET / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    if WARM + args.rounds * args.queries > len(texts):
        parser.error(f"{args.rounds} rounds of {args.queries} new queries need more than the "
                     f"{len(texts)} queries there are")
    per: dict[str, list[float]] = {"python-sdk": [], "minimal": []}
    sizes: list[int] = []
    same = 0
    asked = 0
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        start = WARM + r * args.queries
        warm, queries = texts[:WARM], texts[start:start + args.queries]
        order = ("python-sdk", "minimal") if r % 2 == 0 else ("minimal", "python-sdk")
        got: dict[str, dict[str, Any]] = {}
        for who in order:
            got[who] = (anyio.run(sdk, args.index, warm, queries) if who == "python-sdk"
                        else minimal(args.index, warm, queries))
            per[who].extend(got[who]["times"])
        sizes.extend(got["minimal"]["sizes"])
        same += sum(a == b for a, b in zip(got["python-sdk"]["found"], got["minimal"]["found"],
                                            strict=True))
        asked += len(queries)
        load.append(os.getloadavg()[0])
    out: dict[str, Any] = {
        "index": str(args.index), "cpus": os.cpu_count(), "rounds": args.rounds,
        "queries_per_round": args.queries, "load_1min": load,
        "reply_bytes_median": statistics.median(sizes),
        "same_chunks": f"{same}/{asked}",
    }
    for who, times in per.items():
        out[who] = {"p50_ms": round(statistics.median(times), 2),
                    "p95_ms": round(pct(times, 0.95), 2)}
    print(json.dumps(out, indent=2))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
