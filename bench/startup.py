"""Time from spawning `python -m pocketmcp` to initialize, tools/list and the first search.

The python-sdk client spawns the server over stdio, as an editor does, on a copy of
examples/kb and a fresh index each run; the server serves on its own (SHARE=off: editors
sharing one server are measured by bench/shared.py). Prints p50/p95 over the runs and
writes JSON.

With `--again`, each folder is indexed by a first server, and a second one (SHARE=off: a
server of its own) is timed: its first search, sent right after `initialize` while the
model still loads, and how it came (by keywords, with the "still loading" notice, or
hybrid); then the first hybrid answer. `--python` runs the servers with another checkout's
interpreter (its .venv) for a before/after in one run.

    .venv/bin/python bench/startup.py --runs 10
    .venv/bin/python bench/startup.py --again --runs 8 --python ../old/.venv/bin/python

Results: bench/results/startup.json (`--again`: startup_again.json).

Figures on: docs/benchmarks.md (the start-up table); docs/sharing.md (`--again`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import ROOT, Stopwatch, parser_for, server_env, stdio_session, summary, write_results


async def again_run(folder: Path, db: Path, python: str) -> dict[str, float]:
    """A second start on an indexed folder: its first search while the model loads."""
    first = await one_run(folder, db, python, warm=0)
    assert first["first_search_s"] > 0
    out: dict[str, float] = {}
    with open(os.devnull, "w") as errlog:
        started = time.perf_counter()
        async with stdio_session(server_env(db, folder, SHARE="off"), errlog=errlog,
                                 python=python) as session:
            out["initialize_s"] = time.perf_counter() - started
            sent = time.perf_counter()
            result = await session.call_tool("search", {"query": "sourdough starter"})
            assert not result.is_error and result.structured_content["matches"]
            out["first_search_s"] = time.perf_counter() - sent
            notice = result.structured_content.get("notice") or ""
            out["first_by_keywords"] = float("still loading" in notice)
            while "still loading" in notice:
                await anyio.sleep(0.05)
                result = await session.call_tool("search", {"query": "sourdough starter"})
                notice = result.structured_content.get("notice") or ""
            out["first_hybrid_s"] = time.perf_counter() - started
    return out


async def one_run(folder: Path, db: Path, python: str = sys.executable, warm: int = 20
                  ) -> dict[str, float]:
    started = time.perf_counter()
    out: dict[str, float] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_session(server_env(db, folder, SHARE="off"), errlog=errlog,
                                 python=python) as session:
            out["initialize_s"] = time.perf_counter() - started
            await session.list_tools()
            out["tools_list_s"] = time.perf_counter() - started
            result = await session.call_tool("search", {"query": "sourdough starter"})
            assert not result.is_error and result.structured_content["matches"]
            out["first_search_s"] = time.perf_counter() - started
            if warm:
                watch = Stopwatch()
                for _ in range(warm):
                    with watch:
                        await session.call_tool("search",
                                                {"query": "why are my pods unreachable"})
                out["warm_search_ms"] = sum(watch.times) / warm
    return out


async def main() -> None:
    parser = parser_for(__doc__, "startup")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--again", action="store_true",
                        help="time a second start on an indexed folder")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the servers (another checkout's)")
    args = parser.parse_args()
    if args.again:
        args.measure = "startup_again"
    runs = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-startup-") as tmp:
        for i in range(args.runs):
            folder = Path(tmp) / f"kb{i}"
            shutil.copytree(ROOT / "examples" / "kb", folder)
            db = Path(tmp) / f"i{i}.db"
            runs.append(await (again_run(folder, db, args.python) if args.again
                               else one_run(folder, db, args.python)))
    figures = {}
    for key in runs[0]:
        figures[key] = summary([r[key] for r in runs], unit="", digits=3)
        print(f"{key:>16}: p50 {figures[key]['p50']:.3f}  p95 {figures[key]['p95']:.3f}")
    write_results(args, {"runs": args.runs, "again": args.again, "python": args.python,
                         "summary": figures})


if __name__ == "__main__":
    anyio.run(main)
