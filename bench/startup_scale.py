"""Start-up to first search, search calls and memory of a server spawned on a large index.

For each index kept by `bench/search.py --keep FOLDER`, spawns `python -m pocketmcp` over
stdio with the python-sdk client, as an editor does (no watched folder), and measures: the
time from spawn to `initialize`, to the first `search` answered (by keywords, with a notice,
while the model loads: `first_search_notice`) and the server's CPU time (every thread) by
then, p50/p95 of whole hybrid `search` calls through the client for new queries (the query
embedding included; each call's time in order, and how much of it the client's own check of
the result against the tool's output schema took), and the server's resident memory after
them: anonymous (the process heap) and file-backed (mapped files, the page
cache's) from /proc/PID/status. The start-up is broken down from the server's own log lines
(LOG_LEVEL=debug), in seconds after spawn: `serving` (Python's start and the imports of the
runtime), `ready` (the model loaded, the index open, the query session warm) and
`session_up` (the MCP SDK and the tools imported in their thread; the SDK serves the
session). A baseline from before the SDK served stdio from the first byte logs `front_up`
(its stdio front could answer `initialize`) and `sdk_up` (the SDK took the session over)
instead.

With `--baseline SRC`, the same runs are made with the package from SRC (a checkout of an
earlier commit, e.g. `git archive COMMIT pocketmcp | tar -x -C SRC`) first on PYTHONPATH,
alternating with the current code so both see the same machine load.

With `--share`, the server is spawned as an editor's is by default (SHARE on) on an index
no server serves yet: the first editor's path, which starts the index's shared server and
relays to it; the shared server is stopped after each run.

    .venv/bin/python bench/startup_scale.py --folder ../benchdata --sizes 50000,1000000 \\
        --baseline ../base --runs 3

Results: bench/results/startup_scale.json (with --baseline, both codes' figures).

Figures on: docs/benchmarks.md (the plot's start-up panel); docs/changelog.md.
"""

from __future__ import annotations

import datetime
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import data
from common import (
    Stopwatch,
    children,
    cpu_s,
    memory_mib,
    parser_for,
    server_env,
    stdio_session,
    stop_shared,
    write_results,
)

FIRST_QUERY = "sourdough starter"
SECOND_QUERY = "owls hunting small mammals at night"


STAGES = ("serving", "ready", "session_up", "front_up", "sdk_up")  # log events from spawn


def stages(log: Path, spawned: float) -> dict[str, float]:
    """Seconds from spawn to each of STAGES, from the server's JSON log lines."""
    found: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") in STAGES:
            at = datetime.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
            found.setdefault(f"{event['event']}_s", round(at.timestamp() - spawned, 3))
    return found


async def one_run(db: Path, source: Path | None, queries: list[str], share: bool = False
                  ) -> dict[str, object]:
    # A server of its own, or (share) the first editor's bridge and the server it starts.
    env = server_env(db, code=source, log_level="debug", **({} if share else {"SHARE": "off"}))
    stop_shared(db)
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-start-") as cwd:
        before = set(children())
        log = Path(cwd) / "server.log"
        spawned = time.time()
        started = time.perf_counter()
        with open(log, "w") as errlog:
            async with stdio_session(env, errlog=errlog, cwd=Path(cwd)) as session:
                out["initialize_s"] = round(time.perf_counter() - started, 3)
                await session.list_tools()
                out["tools_list_s"] = round(time.perf_counter() - started, 3)
                while True:  # NOT_READY after a wait: asked again, as a client would
                    result = await session.call_tool("search", {"query": FIRST_QUERY})
                    text = str(result.content[0].text) if result.content else ""  # type: ignore[union-attr]
                    if not (result.is_error and "NOT_READY" in text):
                        break
                    out["not_ready_answers"] = int(str(out.get("not_ready_answers", 0))) + 1
                assert not result.is_error, result.content
                out["first_search_s"] = round(time.perf_counter() - started, 3)
                # Answered by keywords while the model loads: said in the notice.
                out["first_search_notice"] = (result.structured_content or {}).get("notice")
                server = sorted(set(children()) - before)
                if server:
                    out["cpu_to_first_search_s"] = cpu_s(server[-1])
                # The next new query at once: on stdio the SDK is imported after the first
                # search, and this one may wait for it.
                t = time.perf_counter()
                result = await session.call_tool("search", {"query": SECOND_QUERY})
                assert not result.is_error, result.content
                out["second_search_ms"] = round((time.perf_counter() - t) * 1000, 1)
                # The calls below measure a server in its stride: once the SDK has the session
                # (a server whose front answered `initialize` logs `sdk_up` then).
                deadline = time.perf_counter() + 10
                while time.perf_counter() < deadline:
                    text = log.read_text(encoding="utf-8", errors="replace")
                    if '"front_initialize"' not in text or '"sdk_up"' in text:
                        break
                    await anyio.sleep(0.05)
                calls = Stopwatch()
                checks = Stopwatch()  # the client's own check of each result
                check = session.validate_tool_result

                async def timed_check(name: str, result: Any) -> None:
                    with checks:
                        await check(name, result)

                session.validate_tool_result = timed_check  # type: ignore[method-assign]
                for query in queries:
                    with calls:
                        result = await session.call_tool("search", {"query": query,
                                                                    "top_k": 10})
                    assert not result.is_error, result.content
                out |= {f"hybrid_call_{k}": v for k, v in calls.summary().items()}
                out["hybrid_calls_ms"] = [round(ms, 1) for ms in calls.times]  # in order
                # Of each call, the python-sdk client's check of the result against the
                # tool's output schema (jsonschema, in the client's process).
                out |= {f"client_schema_check_{k}": v for k, v in checks.summary().items()}
                server = sorted(set(children()) - before)
                if server:
                    out["memory_mib"] = memory_mib(server[-1])
        out.update(stages(log, spawned))
    stop_shared(db)
    return out


def summary(runs: list[dict[str, object]]) -> dict[str, object]:
    keys = ("initialize_s", "tools_list_s", "first_search_s", "second_search_ms",
            "cpu_to_first_search_s",
            "hybrid_call_p50_ms", "hybrid_call_p95_ms", "client_schema_check_p50_ms",
            "client_schema_check_p95_ms", *(f"{stage}_s" for stage in STAGES))
    out: dict[str, object] = {k: round(statistics.median(float(str(r[k])) for r in runs), 3)
                              for k in keys if all(k in r for r in runs)}
    mems = [r["memory_mib"] for r in runs if "memory_mib" in r]
    if mems:
        out["memory_mib"] = {k: max(float(m[k]) for m in mems)  # type: ignore[index]
                             for k in mems[0]}  # type: ignore[union-attr]
    out["runs"] = runs
    return out


def main() -> None:
    parser = parser_for(__doc__, "startup_scale")
    parser.add_argument("--folder", type=Path, required=True,
                        help="index files kept by bench/search.py --keep")
    parser.add_argument("--sizes", default="50000,1000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--queries", type=int, default=40, help="search calls per run")
    parser.add_argument("--share", action="store_true",
                        help="the first editor's default path (SHARE on, no server running)")
    parser.add_argument("--baseline", type=Path,
                        help="source tree of the earlier commit, run alternating with this one")
    args = parser.parse_args()
    texts = data.queries()
    sizes = [int(s) for s in args.sizes.split(",")]
    missing = [str(args.folder / f"search-{n}.db") for n in sizes
               if not (args.folder / f"search-{n}.db").is_file()]
    if missing:  # opening them would create empty indexes, and measure those
        parser.error(f"no index at {', '.join(missing)}: make them with "
                     "bench/search.py --keep, or point --folder at them")
    results = []
    for n in sizes:
        db = args.folder / f"search-{n}.db"
        prepared = data.prepare(db)
        print(f"{n}: vector file ready in {prepared} s", file=sys.stderr)
        variants: dict[str, Path | None] = {"current": None}
        if args.baseline:
            variants = {"baseline": args.baseline.resolve(), **variants}
        runs: dict[str, list[dict[str, object]]] = {name: [] for name in variants}
        for i in range(args.runs):
            # New queries every run: none is answered from a cache.
            queries = texts[(i + 1) * args.queries:(i + 2) * args.queries]
            for name, source in variants.items():
                run = anyio.run(one_run, db, source, queries, args.share)
                print(json.dumps({"chunks": n, "code": name, **run}), file=sys.stderr)
                runs[name].append(run)
        row: dict[str, object] = {"chunks": n, "share": args.share,
                                  "vector_file_prepare_s": prepared,
                                  **{name: summary(r) for name, r in runs.items()}}
        if args.baseline:  # current / baseline of the medians, from the same run
            now, before = row["current"], row["baseline"]
            assert isinstance(now, dict) and isinstance(before, dict)
            row["ratio_current_to_baseline"] = {
                k: round(float(now[k]) / float(before[k]), 3)
                for k in ("serving_s", "ready_s", "initialize_s", "first_search_s",
                          "cpu_to_first_search_s", "hybrid_call_p50_ms", "hybrid_call_p95_ms")
                if k in now and k in before}
        results.append(row)
    write_results(args, {"results": results})


if __name__ == "__main__":
    main()
