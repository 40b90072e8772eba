"""What a search call costs through stdio, with the python-sdk client and with a minimal one.

A call measured through the python-sdk client includes that client's own work: parsing the
reply into pydantic models and checking its structured content against the tool's output
schema (jsonschema). Editors run other clients. So each round spawns `python -m pocketmcp`
on an index twice, one after the other in alternating order: once driven by the python-sdk
client, once by a minimal JSON-RPC client (one line written, lines read until the reply
with its id: the server's share and the pipes, nothing else). Both ask the same new SciFact
queries (hybrid search, top 10 with no score threshold, the query embedding included)
once the MCP SDK has the session (a baseline from before the SDK served stdio from the
first byte answered the first seconds' searches with a stdio front, and logged `sdk_up` when
the SDK took over) and after a warm-up of 20 others; per client it reports p50/p95 of every
call over all rounds and the median reply size, and it checks that both got the same chunks
in the same order.

    .venv/bin/python bench/client_cost.py --index ../benchdata/search-50000.db \\
        --index ../benchdata/search-1000000.db --rounds 4

With `--paths`, it measures instead what the way to the server costs, all through the
python-sdk client: a call that does almost nothing (`list_libraries`) and a hybrid search,
by three paths in alternating order each round: the SDK's in-memory client beside the
server in this process (the tool's own work and the SDK's, nothing else), a process serving
alone over stdio (SHARE=off), and the default path an editor takes (its process a bridge
over stdio, relaying each message to the index's shared HTTP server, which the first
session started). It reports p50/p95 per path and what the default path adds to the
in-memory client's p50 (`default_minus_memory_ms`), and the CPU time a call took in all
the processes of its path (`cpu_empty_ms_a_call`, `cpu_search_ms_a_call`); then, while the
shared server still runs, the wall time of `pocketmcp search QUERY --json` from a shell
(`cli_search_wall`), which asks that server.

    .venv/bin/python bench/client_cost.py --paths --index ../benchdata/search-200000.db

Results: bench/results/client_cost.json, one entry per index (client_cost_paths.json with
`--paths`); the previous commit's run with its own interpreter
(`../prev/.venv/bin/python bench/client_cost.py ... --as-baseline`) is the .baseline.json.

Figures on: docs/development.md (how to run it); docs/changelog.md (its figures).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import data
from common import (
    Stopwatch,
    children,
    cpu_s,
    load_1min,
    parser_for,
    server_env,
    stdio_session,
    stop_shared,
    summary,
    write_results,
)

WARM = 20  # calls before the measured ones
SDK_WAIT_S = 15.0  # a baseline's stdio front handed over 5 s after start at the latest


def environment(db: Path) -> dict[str, str]:
    return server_env(db, log_level="debug", SHARE="off")  # a server of its own


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
            calls = Stopwatch()
            sizes, found = [], []
            for i, query in enumerate([*warm, *queries]):
                with calls:
                    result, size = ask("tools/call", {"name": "search",
                                                      "arguments": arguments(query)})
                assert not result.get("isError"), result
                if i >= len(warm):
                    sizes.append(size)
                    found.append(chunk_ids(result["structuredContent"]))
        finally:
            server.kill()
            server.wait()
    return {"times": calls.times[len(warm):], "sizes": sizes, "found": found}


async def sdk(db: Path, warm: list[str], queries: list[str]) -> dict[str, Any]:
    """Calls by the python-sdk client."""
    with tempfile.TemporaryDirectory(prefix="pocketmcp-client-") as cwd:
        log = Path(cwd) / "server.log"
        with open(log, "w") as errlog:
            async with stdio_session(environment(db), errlog=errlog,
                                     cwd=Path(cwd)) as session:
                await anyio.to_thread.run_sync(wait_for_sdk, log)
                await session.list_tools()
                calls = Stopwatch()
                found = []
                for i, query in enumerate([*warm, *queries]):
                    with calls:
                        result = await session.call_tool("search", arguments(query))
                    assert not result.is_error, result.content
                    if i >= len(warm):
                        found.append(chunk_ids(result.structured_content or {}))
    return {"times": calls.times[len(warm):], "found": found}


def measure(index: Path, texts: list[str], rounds: int, per_round: int) -> dict[str, Any]:
    """Both clients over `rounds` rounds of `per_round` new queries on one index."""
    per: dict[str, list[float]] = {"python-sdk": [], "minimal": []}
    sizes: list[int] = []
    same = 0
    asked = 0
    load = [load_1min()]
    for r in range(rounds):
        start = WARM + r * per_round
        warm, queries = texts[:WARM], texts[start:start + per_round]
        order = ("python-sdk", "minimal") if r % 2 == 0 else ("minimal", "python-sdk")
        got: dict[str, dict[str, Any]] = {}
        for who in order:
            got[who] = (anyio.run(sdk, index, warm, queries) if who == "python-sdk"
                        else minimal(index, warm, queries))
            per[who].extend(got[who]["times"])
        sizes.extend(got["minimal"]["sizes"])
        same += sum(a == b for a, b in zip(got["python-sdk"]["found"], got["minimal"]["found"],
                                            strict=True))
        asked += len(queries)
        load.append(load_1min())
    out: dict[str, Any] = {
        "index": str(index), "rounds": rounds, "queries_per_round": per_round,
        "load_1min": load,
        "reply_bytes_median": statistics.median(sizes),
        "same_chunks": f"{same}/{asked}",
    }
    for who, times in per.items():
        out[who] = summary(times)
    print(json.dumps(out, indent=2))
    return out


EMPTY = "list_libraries"  # a tool that reads one small table: the call's way, nearly alone


async def path_calls(session: Any, queries: list[str], empties: int, others: list[int]
                     ) -> dict[str, list[float]]:
    """`empties` empty calls and a search per query, after a warm-up of each: their times,
    and the CPU time each kind took a call, this process's and the `others`' together (on a
    shared machine it varies less than the time waited)."""
    for query in queries[:WARM]:
        await session.call_tool(EMPTY, {})
        await session.call_tool("search", arguments(query))

    def cpu() -> float:
        return time.process_time() + sum(cpu_s(pid) for pid in others)

    empty, searched = Stopwatch(), Stopwatch()
    started = cpu()
    for _ in range(empties):
        with empty:
            result = await session.call_tool(EMPTY, {})
        assert not result.is_error, result.content
    between = cpu()
    for query in queries[WARM:]:
        with searched:
            result = await session.call_tool("search", arguments(query))
        assert not result.is_error, result.content
    ended = cpu()
    return {"empty": empty.times, "search": searched.times,
            "cpu_empty": [(between - started) * 1000 / empties],
            "cpu_search": [(ended - between) * 1000 / len(queries[WARM:])]}


async def in_memory(db: Path, queries: list[str], empties: int) -> dict[str, list[float]]:
    """The server in this process, as `serve` builds it, through the SDK's in-memory
    client."""
    from mcp import Client

    from pocketmcp import logs
    from pocketmcp.config import load
    from pocketmcp.mcp.server import build_server
    from pocketmcp.plans import serving
    from pocketmcp.runtime import open_runtime

    logs.configure("warning")  # as the spawned servers log (server_env)
    config = load({}, environ={"SQLITE_PATH": str(db), "LOG_LEVEL": "warning"})
    async with open_runtime(config, serving(False)) as runtime:
        await runtime.started()
        async with Client(build_server(runtime), mode="legacy") as client:
            return await path_calls(client, queries, empties, [])


async def over_stdio(db: Path, queries: list[str], empties: int, **settings: str
                     ) -> dict[str, list[float]]:
    """A spawned `python -m pocketmcp` (with `settings`) through the python-sdk client."""
    from pocketmcp.mcp import discovery
    from pocketmcp.store.places import at_file

    before = set(children())
    with tempfile.TemporaryDirectory(prefix="pocketmcp-client-") as cwd, open(
            Path(cwd) / "server.log", "w") as errlog:
        async with stdio_session(server_env(db, **settings), errlog=errlog,
                                 cwd=Path(cwd)) as session:
            await session.call_tool("search", arguments(queries[0]))  # the model is in
            others = sorted(set(children()) - before)  # the spawned process
            shared = discovery.find(at_file(db))  # the server it relays to, if it does
            if shared is not None:
                others.append(shared.pid)
            return await path_calls(session, queries, empties, others)


PATHS = {
    "memory": lambda db, q, n: anyio.run(in_memory, db, q, n),
    "alone": lambda db, q, n: anyio.run(partial(over_stdio, db, q, n, SHARE="off")),
    "default": lambda db, q, n: anyio.run(over_stdio, db, q, n),
}


CLI_RUNS = 5  # `pocketmcp search` runs while the shared server runs


def cli_searches(index: Path, queries: list[str]) -> list[float]:
    """Wall seconds of `pocketmcp search QUERY` from a shell while the index's server runs
    (each must have been answered by that server, not searched in its own process)."""
    walls = []
    for query in queries:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pocketmcp", "search", query, "--json"],
                              env=server_env(index), capture_output=True, text=True,
                              check=True)
        walls.append(time.perf_counter() - started)
        via = json.loads(done.stdout)["via"]
        if via == "local":
            raise RuntimeError("`pocketmcp search` searched in its own process, not the "
                               "server's")
    return walls


def measure_paths(index: Path, texts: list[str], rounds: int, per_round: int
                  ) -> dict[str, Any]:
    """The empty call and the search by each path over `rounds` rounds, alternating."""
    times: dict[str, dict[str, list[float]]] = {
        p: {"empty": [], "search": [], "cpu_empty": [], "cpu_search": []} for p in PATHS}
    cli: list[float] = []
    load = [load_1min()]
    stop_shared(index)  # the default path's first session starts its own
    try:
        for r in range(rounds):
            queries = texts[:WARM] + texts[WARM + r * per_round:WARM + (r + 1) * per_round]
            order = list(PATHS)[r % 3:] + list(PATHS)[:r % 3]
            for path in order:
                got = PATHS[path](index, queries, per_round)
                for kind, values in got.items():
                    times[path][kind].extend(values)
                if path == "default":
                    if r == rounds - 1:  # while the shared server still runs
                        cli = cli_searches(index, texts[-CLI_RUNS:])
                    stop_shared(index)  # else SHARE=off would relay to it
            load.append(load_1min())
    finally:
        stop_shared(index)
    out: dict[str, Any] = {"index": str(index), "rounds": rounds, "calls_per_round": per_round,
                           "load_1min": load}
    for path, kinds in times.items():
        out[path] = {kind: summary(kinds[kind]) for kind in ("empty", "search")} | {
            f"{kind}_ms_a_call": round(statistics.mean(kinds[kind]), 2)
            for kind in ("cpu_empty", "cpu_search")}
    out["cli_search_wall"] = summary(cli, unit="s", digits=3)
    out["default_minus_memory_ms"] = {
        kind: round(out["default"][kind]["p50_ms"] - out["memory"][kind]["p50_ms"], 2)
        for kind in ("empty", "search")}
    print(json.dumps(out, indent=2))
    return out


def main() -> None:
    parser = parser_for(__doc__, "client_cost")
    parser.add_argument("--index", type=Path, required=True, action="append",
                        help="an index kept by bench/search.py --keep (again for more)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--queries", type=int, default=100, help="measured calls a round")
    parser.add_argument("--paths", action="store_true",
                        help="what each way to the server costs (in memory, alone, default)")
    args = parser.parse_args()
    texts = data.queries()
    if args.paths:
        args.measure = "client_cost_paths"
        write_results(args, {"results": [measure_paths(index, texts, args.rounds, args.queries)
                                         for index in args.index]})
        return
    if WARM + args.rounds * args.queries > len(texts):
        parser.error(f"{args.rounds} rounds of {args.queries} new queries need more than the "
                     f"{len(texts)} queries there are")
    results = [measure(index, texts, args.rounds, args.queries) for index in args.index]
    write_results(args, {"results": results})


if __name__ == "__main__":
    main()
