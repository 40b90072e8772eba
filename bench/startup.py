"""Time from spawning `python -m pocketmcp` to initialize, tools/list and the first search.

The python-sdk client spawns the server over stdio, as an editor does, on a copy of
examples/kb and a fresh index each run. Prints p50/p95 over the runs and writes JSON.

    .venv/bin/python bench/startup.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


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
            t = time.perf_counter()
            for _ in range(20):
                await session.call_tool("search", {"query": "why are my pods unreachable"})
            out["warm_search_ms"] = (time.perf_counter() - t) / 20 * 1000
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "startup.json")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-startup-") as tmp:
        for i in range(args.runs):
            folder = Path(tmp) / f"kb{i}"
            shutil.copytree(ROOT / "examples" / "kb", folder)
            runs.append(await one_run(folder, Path(tmp) / f"i{i}.db"))
    summary = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        summary[key] = {"p50": round(statistics.median(values), 3),
                        "p95": round(pct(values, 0.95), 3)}
        print(f"{key:>16}: p50 {summary[key]['p50']:.3f}  p95 {summary[key]['p95']:.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": args.runs, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    anyio.run(main)
