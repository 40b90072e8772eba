"""One warm server per index: memory and start of editors sharing it, the model's idle unload,
and searches while a folder is indexed. Real processes, the real MCP client (python-sdk).

- editors: one editor alone (SHARE=off: a whole server in its stdio process), then
  `--editors` editors with SHARE=on, spawned one after the other (the first starts the shared
  server). For each: spawn to the first answered search. Then the resident memory of every
  PocketMCP process (the bridges and the shared server) against the editor alone.
- first: an indexed folder and no server running: a first editor (SHARE=on) from spawn to
  `initialize` answered and to its first search answered (it starts the shared server),
  then a later editor's spawn to its first search; `--runs` times, alternating with the
  code of `--base` when given.
- unload: an HTTP server watching the notes, warmed by searches, with MODEL_IDLE_UNLOAD_S;
  its memory before and after the unload, the first search after it (keyword results) and
  the time until searches are hybrid again, against the reload time the server reports.
- indexing: `pocketmcp index` of `--notes` notes with the model's default threads against one
  thread per core (alternating rounds): throughput. Then an HTTP server indexing them from
  scratch while one client searches (hybrid) without pause: p50/p95 while indexing, and once
  it is done (idle). With `--window S`, only the first S seconds of indexing are searched
  (the keyword phase and the start of the vectors'), so a large folder's run stays bounded
  by its embedding time. A progress line goes to stderr every minute.

    .venv/bin/python bench/shared.py --parts editors,unload,indexing --notes 5000
    .venv/bin/python bench/shared.py --parts indexing --notes 5000 --rounds 0 --window 240
    .venv/bin/python bench/shared.py --parts first --runs 5 --base ../prev

Results: bench/results/shared.json.

Figures on: docs/sharing.md.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import data
from common import (
    children,
    cpu_s,
    http_server,
    load_1min,
    ms_since,
    parser_for,
    result_path,
    rss_mib,
    run_pocketmcp,
    server_env,
    stdio_session,
    summary,
    venv_python,
    write_results,
)
from mcp import ClientSession
from support.mcp_harness import call, until

from pocketmcp.mcp import discovery
from pocketmcp.store.places import at_file


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


SEARCH = {"top_k": 10, "score_threshold": 0, "mode": "hybrid"}


def environment(root: Path, code: Path | None = None, **settings: str) -> dict[str, str]:
    """A server's settings: the index root/data/index.db of the folder root/kb."""
    return server_env(root / "data" / "index.db", root / "kb", code=code, log_level="info",
                      SERVER_IDLE_EXIT_S="5", **settings)


def notes(root: Path, n: int) -> Path:
    """`n` SciFact abstracts as Markdown notes in root/kb."""
    return data.abstracts(root / "kb", n)


def index_cli(root: Path, **settings: str) -> dict[str, Any]:
    answer: dict[str, Any] = run_pocketmcp("index", "--json", "--progress", "off",
                                           env=environment(root, **settings)).answer
    return answer


# -- editors ------------------------------------------------------------------------------------

async def editors(root: Path, count: int, queries: list[str]) -> dict[str, Any]:
    log = open(root / "editors.err", "w")  # noqa: SIM115
    index = root / "data" / "index.db"
    async with stdio_session(environment(root, SHARE="off"), errlog=log, cwd=root) as alone:
        for q in queries[:10]:
            await call(alone, "search", {"query": q, **SEARCH})
        (pid,) = children()
        alone_mib = rss_mib(pid)
    spawn_ms: list[float] = []
    async with AsyncExitStack() as stack:
        sessions = []
        for _ in range(count):
            started = time.perf_counter()
            session = await stack.enter_async_context(stdio_session(
                environment(root, SHARE="on"), errlog=log, cwd=root))
            await call(session, "search", {"query": queries[len(sessions)], **SEARCH})
            spawn_ms.append(round(ms_since(started), 1))
            sessions.append(session)
        for session in sessions:
            for q in queries[10:20]:
                await call(session, "search", {"query": q, **SEARCH})
        server = discovery.find(at_file(index))
        assert server is not None
        bridges = {pid: rss_mib(pid) for pid in children() if pid != server.pid}
        bridge_cpu = sorted(cpu_s(pid) for pid in bridges)
        server_mib = rss_mib(server.pid)
        status = await call(sessions[-1], "status", {})
    total = server_mib + sum(bridges.values())
    return {"alone_mib": alone_mib, "shared_server_mib": server_mib,
            "bridges_mib": sorted(bridges.values()), "total_mib": round(total, 1),
            "total_vs_alone": round(total / alone_mib, 2),
            "spawn_to_first_search_ms": spawn_ms,
            "later_editors_spawn_to_first_search_ms": summary(spawn_ms[1:]) if count > 1 else {},
            "bridges_cpu_s_after_their_searches": bridge_cpu,
            "clients_seen_by_server": status["sharing"]["clients"]}


# -- first ----------------------------------------------------------------------------------------

async def first_editors(root: Path, queries: list[str], runs: int, base: Path | None
                        ) -> dict[str, Any]:
    """An indexed folder and no server running: the first editor's spawn to `initialize`
    answered and to its first search answered, then a later editor's spawn to its first
    search (the server the first started still runs). With `base`, that checkout's code
    alternates with this one's, run by run (each on an index of its own)."""
    codes = {"this": sys.executable}
    if base is not None:
        codes["base"] = str(venv_python(base))
    for name, python in codes.items():
        # cwd: `-m` looks in the working folder first, where a checkout's package would win
        run_pocketmcp("index", "--json", "--progress", "off", python=python,
                      env=environment(root / name), cwd=root)
    out: dict[str, dict[str, list[float]]] = {
        name: {"initialize_ms": [], "first_search_ms": [], "later_first_search_ms": []}
        for name in codes}
    log = open(root / "first.err", "w")  # noqa: SIM115
    for run in range(runs):
        for name, python in codes.items():
            env = {**environment(root / name, SHARE="on"), "SERVER_IDLE_EXIT_S": "1"}
            started = time.perf_counter()
            async with stdio_session(env, errlog=log, cwd=root, python=python) as first:
                out[name]["initialize_ms"].append(round(ms_since(started), 1))
                await call(first, "search", {"query": queries[run], **SEARCH})
                out[name]["first_search_ms"].append(round(ms_since(started), 1))
                later = time.perf_counter()
                async with stdio_session(env, errlog=log, cwd=root, python=python) as second:
                    await call(second, "search", {"query": queries[run + 1], **SEARCH})
                    out[name]["later_first_search_ms"].append(round(ms_since(later), 1))
            index = at_file(root / name / "data" / "index.db")

            async def serving(index: Any = index) -> bool:
                return discovery.find(index) is not None

            await until(serving, lambda up: not up, 60)  # the shared server exits once idle
    return {name: {key: {**summary(values), "runs": values}
                   for key, values in measured.items()} for name, measured in out.items()}


# -- unload ---------------------------------------------------------------------------------------

def served(root: Path, code: Path | None = None, **settings: str) -> Any:
    """The HTTP server of root's index and folder; `code`: a checkout of other code to serve
    with (this interpreter and packages)."""
    return http_server(environment(root, code, **settings), root / "http.err", cwd=root)


async def status_until(session: ClientSession, test: Any, within_s: float) -> dict[str, Any]:
    return await until(lambda: call(session, "status"), test, within_s)


async def unload(root: Path, queries: list[str], idle_s: int) -> dict[str, Any]:
    with served(root, MODEL_IDLE_UNLOAD_S=str(idle_s)) as server:
        async with server.session() as session:
            await status_until(session, lambda s: s["initial_indexing_done"], 600)
            for q in queries[:20]:
                await call(session, "search", {"query": q, **SEARCH})
            before = rss_mib(server.process.pid)
            await status_until(session, lambda s: s["sharing"]["model_state"] == "unloaded",
                               idle_s * 3 + 30)
            await anyio.sleep(0.5)
            after = rss_mib(server.process.pid)
            started = time.perf_counter()
            first = await call(session, "search", {"query": queries[20], **SEARCH})
            first_ms = ms_since(started)
            hybrid_ms = None
            for q in queries[21:]:
                answer = await call(session, "search", {"query": q, **SEARCH})
                if answer["notice"] is None:
                    hybrid_ms = ms_since(started)
                    break
                await anyio.sleep(0.02)
            status = await call(session, "status", {})
    return {"rss_before_mib": before, "rss_after_unload_mib": after,
            "drop_mib": round(before - after, 1),
            "first_search_after_unload_ms": round(first_ms, 1),
            "first_search_keyword_only": first["notice"] is not None,
            "first_search_matches": len(first["matches"]),
            "notice": first["notice"], "hybrid_again_after_ms": hybrid_ms and round(hybrid_ms, 1),
            "model_reload_s": status["sharing"]["model_reload_s"]}


# -- indexing -------------------------------------------------------------------------------------

def throughput(root: Path, rounds: int) -> dict[str, Any]:
    """`pocketmcp index` with the model's threads at their default, at 1 (INDEX_CPU_BUDGET at
    one core's share), and at one per core (a budget of 100%), in alternating order: chunks
    embedded per second of the whole run."""
    threads = {"default": None, "one": str(100 // (os.cpu_count() or 1)), "uncapped": "100"}
    runs: dict[str, list[float]] = {name: [] for name in threads}
    for r in range(rounds):
        names = list(threads) if r % 2 == 0 else list(reversed(threads))
        for name in names:
            db = root / "data" / f"tp-{name}-{r}.db"
            env = {"SQLITE_PATH": str(db), "LOG_LEVEL": "warning"}
            if threads[name] is not None:
                env["INDEX_CPU_BUDGET"] = threads[name]
            done = index_cli(root, **env)
            runs[name].append(round(done["chunks_embedded"] / done["pipeline_s"], 1))
    mean = {name: sum(v) / len(v) for name, v in runs.items()}
    return {"when": stamp(), "chunks_per_s": runs,
            "default_vs_uncapped": round(mean["default"] / mean["uncapped"], 2),
            "one_thread_vs_uncapped": round(mean["one"] / mean["uncapped"], 2)}


IDLE_SEARCHES = 1_000  # at most, once indexed: enough for a p95


def indexed(status: dict[str, Any], n: int) -> bool:
    """All `n` notes (and the first few) are in, each chunk with its vector."""
    return status["documents"] >= n and status["chunks_waiting"] == 0


PROGRESS_S = 60  # a progress line on stderr this often while a folder is indexed


async def searches_while_indexing(root: Path, queries: list[str], n: int,
                                  code: Path | None = None, name: str = "live",
                                  window_s: float = 0) -> dict[str, Any]:
    """A server watching a folder of a few notes (first scan done), then `n` notes copied in:
    one client searches without pause while they are indexed (for the first `window_s`
    seconds only, when it is given: then it waits for the rest), then as many times idle.
    The searches while indexing are also given apart: while the notes are written for
    keyword search (fewer than `n` documents at the last status), then while their vectors
    come."""
    live = root / name
    folder = notes(live, 5)
    during: list[float] = []
    keywords: list[float] = []  # of `during`: before every note was written for keywords
    idle: list[float] = []
    with served(live, code) as server:
        async with server.session() as session:
            await status_until(session, lambda s: s["initial_indexing_done"], 600)
            for source in sorted((root / "kb").iterdir()):
                (folder / source.name).write_bytes(source.read_bytes())
            i = 0
            began = told = time.perf_counter()
            # Indexed means every chunk has its vector: the keywords come first.
            while not indexed(status := await call(session, "status", {}), n):
                if time.perf_counter() - told >= PROGRESS_S:
                    told = time.perf_counter()
                    print(json.dumps({"indexing_s": round(told - began), "searches": len(during),
                                      "documents": status["documents"],
                                      "chunks_waiting": status["chunks_waiting"],
                                      "p95_ms_so_far": summary(during)["p95_ms"] if during
                                      else None}), file=sys.stderr, flush=True)
                if window_s and time.perf_counter() - began >= window_s:
                    await anyio.sleep(2)  # past the window: the rest is indexed unwatched
                    continue
                for _ in range(5):
                    started = time.perf_counter()
                    await call(session, "search", {"query": queries[i % len(queries)], **SEARCH})
                    during.append(ms_since(started))
                    if status["documents"] < n:
                        keywords.append(during[-1])
                    i += 1
            indexing_s = time.perf_counter() - began
            progress = await call(session, "status", {})
            for q in range(min(max(len(during), 50), IDLE_SEARCHES)):
                started = time.perf_counter()
                await call(session, "search", {"query": queries[q % len(queries)], **SEARCH})
                idle.append(ms_since(started))
    ratio = summary(during)["p95_ms"] / summary(idle)["p95_ms"] if during and idle else None
    in_keywords = summary(keywords)["p95_ms"] / summary(idle)["p95_ms"] if (
        keywords and idle) else None
    return {"code": str(code) if code is not None else "this checkout",
            "searches_during": len(during), "during_ms": summary(during) if during else {},
            "searches_in_keyword_phase": len(keywords),
            "keyword_phase_ms": summary(keywords) if keywords else {},
            "p95_keyword_phase_vs_idle": in_keywords and round(in_keywords, 2),
            "idle_ms": summary(idle), "p95_during_vs_idle": ratio and round(ratio, 2),
            "indexing_s": round(indexing_s, 1), "window_s": window_s or None,
            "documents": progress["documents"],
            "chunks": progress["chunks"]}


async def main() -> None:
    parser = parser_for(__doc__, "shared")
    parser.add_argument("--parts", default="editors,unload,indexing")
    parser.add_argument("--editors", type=int, default=4)
    parser.add_argument("--small", type=int, default=100, help="notes for editors and unload")
    parser.add_argument("--notes", type=int, default=5000, help="notes indexed in `indexing`")
    parser.add_argument("--window", type=float, default=0,
                        help="seconds of indexing searched without pause (0: all of it)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="throughput rounds (0: keep the last run's throughput)")
    parser.add_argument("--idle-unload-s", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5, help="runs of `first`")
    parser.add_argument("--base", type=Path, default=None,
                        help="a checkout of earlier code whose searches while indexing are "
                             "measured first, in the same run (same interpreter and packages)")
    args = parser.parse_args()
    parts = args.parts.split(",")
    queries = data.queries()
    out: dict[str, Any] = {"load_1min_before": load_1min()}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-shared-") as tmp:
        small = Path(tmp) / "small"
        if {"editors", "unload"} & set(parts):
            notes(small, args.small)
            index_cli(small)
        if "editors" in parts:
            out["editors"] = {"when": stamp(), "load_1min": load_1min(),
                              **await editors(small, args.editors, queries)}
            print(json.dumps(out["editors"]), file=sys.stderr)
            await anyio.sleep(8)  # the shared server exits once idle
        if "first" in parts:
            (Path(tmp) / "first").mkdir()
            for name in ("this", "base") if args.base is not None else ("this",):
                notes(Path(tmp) / "first" / name, args.small)
            out["first"] = {"when": stamp(), "load_1min": load_1min(),
                            "base": str(args.base) if args.base else None,
                            **await first_editors(Path(tmp) / "first", queries, args.runs,
                                                  args.base)}
            out["first"]["load_1min_after"] = load_1min()
            print(json.dumps(out["first"]), file=sys.stderr)
        if "unload" in parts:
            out["unload"] = {"when": stamp(), "load_1min": load_1min(),
                             **await unload(small, queries, args.idle_unload_s)}
            print(json.dumps(out["unload"]), file=sys.stderr)
        if "indexing" in parts:
            big = Path(tmp) / "big"
            notes(big, args.notes)
            if args.base is not None:
                out["indexing_base"] = {"when": stamp(), "load_1min": load_1min(),
                                        "notes": args.notes, **await searches_while_indexing(
                                            big, queries, args.notes, args.base, "base",
                                            args.window)}
                out["indexing_base"]["load_1min_after"] = load_1min()
                print(json.dumps(out["indexing_base"]), file=sys.stderr)
            out["indexing"] = {"when": stamp(), "load_1min": load_1min(), "notes": args.notes,
                               **await searches_while_indexing(big, queries, args.notes,
                                                                  window_s=args.window)}
            out["indexing"]["load_1min_after"] = load_1min()
            print(json.dumps(out["indexing"]), file=sys.stderr)
            if args.rounds > 0:
                out["indexing"]["throughput"] = throughput(big, args.rounds)
                print(json.dumps(out["indexing"]["throughput"]), file=sys.stderr)
    out["load_1min_after"] = load_1min()
    # The parts not run this time are kept from the file's last run (each part says when).
    path = args.out or result_path(args.measure)
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        for part in ("editors", "first", "unload", "indexing"):
            if part not in out and part in previous:
                out[part] = previous[part]
        # --rounds 0: the throughput of the last run that measured it, with its own date.
        if "indexing" in out and "throughput" not in out["indexing"]:
            kept = previous.get("indexing", {}).get("throughput")
            if kept is not None:
                out["indexing"]["throughput"] = kept
    write_results(args, out)


if __name__ == "__main__":
    anyio.run(main)
