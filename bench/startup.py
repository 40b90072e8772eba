"""Time from spawning `python -m pocketmcp` to initialize, tools/list and the first search.

The python-sdk client spawns the server over stdio, as an editor does, on a copy of
examples/kb and a fresh index each run. Prints p50/p95 over the runs and writes JSON.

    .venv/bin/python bench/startup.py --runs 10

Results: bench/results/startup.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import ROOT, Stopwatch, add_result_args, summary, write_results
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def one_run(folder: Path, db: Path) -> dict[str, float]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
           "WATCH_DIR": str(folder), "SQLITE_PATH": str(db), "LOG_LEVEL": "warning"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp"], env=env)
    started = time.perf_counter()
    out: dict[str, float] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
            read, write
        ) as session:
            await session.initialize()
            out["initialize_s"] = time.perf_counter() - started
            await session.list_tools()
            out["tools_list_s"] = time.perf_counter() - started
            result = await session.call_tool("search", {"query": "sourdough starter"})
            assert not result.is_error and result.structured_content["matches"]
            out["first_search_s"] = time.perf_counter() - started
            warm = Stopwatch()
            for _ in range(20):
                with warm:
                    await session.call_tool("search", {"query": "why are my pods unreachable"})
            out["warm_search_ms"] = sum(warm.times) / 20
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    add_result_args(parser, "startup")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-startup-") as tmp:
        for i in range(args.runs):
            folder = Path(tmp) / f"kb{i}"
            shutil.copytree(ROOT / "examples" / "kb", folder)
            runs.append(await one_run(folder, Path(tmp) / f"i{i}.db"))
    figures = {}
    for key in runs[0]:
        figures[key] = summary([r[key] for r in runs], unit="", digits=3)
        print(f"{key:>16}: p50 {figures[key]['p50']:.3f}  p95 {figures[key]['p95']:.3f}")
    write_results(args, {"runs": args.runs, "summary": figures})


if __name__ == "__main__":
    anyio.run(main)
