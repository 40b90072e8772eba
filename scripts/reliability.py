"""The reliability suite's long forms; each prints its counts as one JSON line and the run
ends with exit code 1 if any invariant failed. The short forms run in the test suite
(tests/e2e/test_reliability.py, tests/mcp/test_long_writes.py); the protocol fuzzer's long form
is scripts/fuzz_protocol.py.

    .venv/bin/python scripts/reliability.py [--part kill|writes|badinput|load|all]
        [--rounds 20] [--files 200] [--write-rounds 10] [--clients 8] [--searches 100]

- kill: kill -9 rounds during `pocketmcp index` and `pocketmcp watch` over a folder of
  --files files (some rewritten before each round, so each kill lands in work), each round
  checked (integrity_check, no partial document) and followed by a recovery run that must
  leave the index equal to the folder.
- writes: rounds of tool writes over stdio, each ended by SIGKILL or by the client going
  away in the middle of a write; every acknowledged write must be there, with no partial
  document.
- badinput: the full-size bad-input corpus (tests/support/badinput.py) indexed once; every file must
  end indexed or skipped with a reason, within the time bound.
- load: --clients MCP clients over HTTP, --searches searches each, while --files files are
  indexed; p50/p95 and the error count.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import anyio  # noqa: E402
import httpx2  # noqa: E402
from support.badinput import judge, make_corpus, outcomes, summary  # noqa: E402
from support.chaos import (  # noqa: E402
    Rounds,
    check_index,
    document,
    env_for,
    index_kill_round,
    recover,
    run_index,
    tool_write_round,
    watched_files,
)
from support.load import load_run  # noqa: E402
from support.mcp_harness import start_http, stop_http  # noqa: E402

from pocketmcp.commands.indexing import EXIT_PARTIAL  # noqa: E402

BAD_INPUT_BOUND_S = 900  # the whole corpus, on a busy 2-core machine


def emit(part: str, data: dict[str, Any]) -> None:
    print(json.dumps({"part": part, **data}), flush=True)


def kill_rounds(rounds_wanted: int, files: int) -> bool:
    rng = random.Random(16)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kb = root / "kb"
        kb.mkdir()
        for i in range(files):
            (kb / f"doc{i:04d}.md").write_text(document(rng, f"d{i}", rng.randint(2, 20)))
        env = env_for(root)
        rounds = Rounds()
        started = time.perf_counter()
        for n in range(rounds_wanted):
            command = "watch" if n % 2 else "index"
            index_kill_round(root, env, rng, rounds, command=command, within_s=15)
            recover(root, env, rounds, timeout_s=1800)
            for i in rng.sample(range(files), max(1, files // 10)):  # work for the next kill
                (kb / f"doc{i:04d}.md").write_text(document(rng, f"d{i}r{n}",
                                                            rng.randint(2, 20)))
        counts = dict(rounds.counts)
        counts.pop("recovered_files", None)
        emit("kill", {**counts, "files": files, "failures": rounds.failures[:5],
                      "seconds": round(time.perf_counter() - started, 1)})
        return not rounds.failures


def write_rounds(rounds_wanted: int) -> bool:
    rng = random.Random(17)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kb").mkdir()
        env = env_for(root)
        rounds = Rounds()
        acknowledged: set[str] = set()
        started = time.perf_counter()
        for n in range(rounds_wanted):
            tool_write_round(root, env, rng, rounds, acknowledged=acknowledged,
                             writes=rng.randint(2, 8), stop="kill" if n % 2 == 0 else "eof")
        final = check_index(root / "data" / "index.db", acknowledged)
        emit("writes", {**dict(rounds.counts), "acknowledged_present": len(acknowledged)
                        - len(final.missing), "failures": rounds.failures[:5],
                        "seconds": round(time.perf_counter() - started, 1)})
        return not rounds.failures and final.ok


def bad_input() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kb = root / "kb"
        kb.mkdir()
        env = env_for(root)
        expected = make_corpus(kb, full=True, max_file_bytes=20 * 1024 * 1024)
        started = time.perf_counter()
        code, result, lines = run_index(root, env, timeout_s=BAD_INPUT_BOUND_S)
        elapsed = time.perf_counter() - started
        db = root / "data" / "index.db"
        found = outcomes(lines, watched_files(db))
        problems = judge(expected, found)
        emit("badinput", {**summary(expected, found), "problems": problems,
                          "exit_code": code, "seconds": round(elapsed, 1),
                          "bound_s": BAD_INPUT_BOUND_S, "integrity_ok": check_index(db).ok,
                          "chunks_embedded": result.get("chunks_embedded")})
        return code == EXIT_PARTIAL and not problems  # indexed, the bad files skipped


def load(clients: int, searches: int, files: int) -> bool:
    rng = random.Random(18)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kb").mkdir()
        for i in range(20):
            (root / "kb" / f"seed{i}.md").write_text(document(rng, f"s{i}", 6))
        server = start_http(root, ready=False)
        try:
            deadline = time.monotonic() + 600  # the first scan, on a busy machine
            while httpx2.get(server.url + "/health/ready", trust_env=False).status_code != 200:
                assert time.monotonic() < deadline, "the server did not become ready"
                time.sleep(0.2)
            figures = anyio.run(lambda: load_run(server, root / "kb", clients=clients,
                                                 searches=searches, files=files))
        finally:
            code = stop_http(server)
        emit("load", {**figures, "exit_code": code})
        return figures["errors"] == 0 and code == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("kill", "writes", "badinput", "load", "all"),
                        default="all")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--write-rounds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--searches", type=int, default=100)
    args = parser.parse_args()
    ok = True
    if args.part in ("kill", "all"):
        ok = kill_rounds(args.rounds, args.files) and ok
    if args.part in ("writes", "all"):
        ok = write_rounds(args.write_rounds) and ok
    if args.part in ("badinput", "all"):
        ok = bad_input() and ok
    if args.part in ("load", "all"):
        ok = load(args.clients, args.searches, min(args.files, 100)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
