"""Hostile probes of the stdio bridge and the shared server, with real processes: how many
are tried, how many a bridge answers otherwise than a process serving alone (should be 0),
and the worst time one takes.

- lines: `--lines` random hostile lines (ids that are objects, lists, floats or booleans,
  lines that are not JSON, cut short, nested deep, batches, wrong envelopes), each sent to
  a bridge relaying to an HTTP server and to a process serving alone, then a ping; the
  answers compared, and the bridge still serving at the end.
- stopped: the shared server stopped (SIGSTOP) while a search waits: the time until the
  search is answered with SERVER_NOT_ANSWERING, then until the next search is answered by
  a server started in its place. `--stops` times.

    .venv/bin/python bench/bridge_probes.py
    .venv/bin/python bench/bridge_probes.py --lines 2000 --stops 5

Results: bench/results/bridge_probes.json.

Figures on: docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import http_server, load_1min, parser_for, server_env, summary, write_results


class Peer:
    """`python -m pocketmcp` on stdio, driven line by line."""

    def __init__(self, root: Path, **settings: str) -> None:
        (root / "kb").mkdir(parents=True, exist_ok=True)
        (root / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C.\n")
        env = server_env(root / "data" / "index.db", root / "kb", log_level="info") | settings
        self.errlog = open(root / "peer.err", "ab")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen([sys.executable, "-m", "pocketmcp"], env=env, cwd=root,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errlog)
        self.buffer = b""
        self.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "probe", "version": "0"}}}))
        self.until("init", 120)
        self.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def send(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.process.stdin.flush()

    def until(self, ident: Any, within_s: float) -> list[dict[str, Any]]:
        """The messages up to and with the answer to `ident` (None: the next message)."""
        assert self.process.stdout is not None
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + within_s
        while True:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                    raise TimeoutError(f"no answer to {ident!r} within {within_s} s")
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError("the process closed its stdout")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            seen.append(message)
            if ident is None or message.get("id") == ident:
                return seen

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)
        self.errlog.close()


def hostile(rng: random.Random) -> bytes:
    """One line a careless or hostile client may send (never a tool call)."""
    ids: list[Any] = [{}, [], {"a": 1}, [1, [2]], 1.5, True, None, "x", 7]
    methods = ["ping", "tools/list", "resources/list", "no/such/method", "",
               "notifications/initialized", 5, ["tools/call"], None]
    kind = rng.choice(["odd_id", "envelope", "json", "bytes", "truncated", "deep"])
    if kind == "odd_id":
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rng.choice(ids[:7]),
                                   "method": rng.choice(methods[:6])}
        if rng.random() < 0.3:
            del message["jsonrpc"]
        return json.dumps(message).encode()
    if kind == "envelope":
        message = {"jsonrpc": rng.choice(["2.0", "1.0", 2, None]), "id": rng.choice(ids),
                   "method": rng.choice(methods)}
        for key in rng.sample(["jsonrpc", "id", "method"], rng.randint(0, 2)):
            del message[key]
        if rng.random() < 0.5:
            message[rng.choice(["params", "result", "error"])] = rng.choice([3, [], "x", {}])
        return json.dumps(message).encode()
    if kind == "json":
        return json.dumps(rng.choice([[], [1, 2], 42, "ping", None, True, [{"id": 1}]])).encode()
    if kind == "truncated":
        whole = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode()
        return whole[:rng.randint(1, len(whole) - 1)]
    if kind == "deep":
        depth = rng.choice([200, 2000, 20000])
        return b"[" * depth + b"]" * depth
    return bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(rng.randint(1, 80)))


def lines(root: Path, count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    (root / "shared" / "kb").mkdir(parents=True)
    with http_server(server_env(root / "shared" / "data" / "index.db", root / "shared" / "kb",
                                log_level="info"), root / "http.err"):
        bridge = Peer(root / "shared", SHARE="on")
        alone = Peer(root / "alone", SHARE="off")
        times: list[float] = []
        differing = 0
        examples: list[dict[str, Any]] = []
        for n in range(count):
            line = hostile(rng)
            got = []
            for peer in (alone, bridge):
                started = time.perf_counter()
                peer.send(line)
                peer.send(json.dumps({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"}))
                seen = peer.until(f"ping-{n}", 30)[:-1]
                while peer is bridge and len(seen) < len(got[0]):
                    # A request is relayed at once: its answer may come after the ping's.
                    try:
                        seen += peer.until(None, 5)
                    except TimeoutError:
                        break  # counted as answered otherwise
                if peer is bridge:
                    times.append((time.perf_counter() - started) * 1000)
                got.append(sorted(json.dumps(m, sort_keys=True) for m in seen))
            if got[0] != got[1]:
                differing += 1
                examples.append({"line": line[:200].decode("utf-8", "replace"),
                                 "alone": got[0], "bridge": got[1]})
        alive = bridge.process.poll() is None
        bridge.close()
        alone.close()
    return {"tried": count, "answered_otherwise_than_alone": differing,
            "examples_answered_otherwise": examples[:5],
            "bridge_still_serving": alive, "answer_ms": summary(times),
            "worst_ms": round(max(times), 1)}


def stopped(root: Path, stops: int) -> dict[str, Any]:
    from pocketmcp.mcp import discovery
    from pocketmcp.store.places import at_file

    reported: list[float] = []
    replaced: list[float] = []
    index = at_file(root / "data" / "index.db")
    editor = Peer(root, SHARE="on", SERVER_IDLE_EXIT_S="2")
    search = {"name": "search", "arguments": {"query": "green tea"}}
    try:
        editor.send(json.dumps({"jsonrpc": "2.0", "id": "warm", "method": "tools/call",
                                "params": search}))
        editor.until("warm", 120)
        for n in range(stops):
            server = discovery.find(index)
            assert server is not None
            os.kill(server.pid, signal.SIGSTOP)
            started = time.perf_counter()
            editor.send(json.dumps({"jsonrpc": "2.0", "id": f"s{n}", "method": "tools/call",
                                    "params": search}))
            answer = editor.until(f"s{n}", 60)[-1]
            reported.append((time.perf_counter() - started) * 1000)
            assert answer["error"]["message"].startswith("SERVER_NOT_ANSWERING"), answer
            started = time.perf_counter()
            editor.send(json.dumps({"jsonrpc": "2.0", "id": f"r{n}", "method": "tools/call",
                                    "params": search}))
            answer = editor.until(f"r{n}", 120)[-1]
            replaced.append((time.perf_counter() - started) * 1000)
            assert "result" in answer, answer
            os.kill(server.pid, signal.SIGKILL)  # the stopped one: done with
    finally:
        editor.close()
    return {"stops": stops, "reported_ms": summary(reported), "worst_reported_ms":
            round(max(reported), 1), "next_answered_ms": summary(replaced),
            "worst_next_answered_ms": round(max(replaced), 1)}


def main() -> None:
    parser = parser_for(__doc__, "bridge_probes")
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    out: dict[str, Any] = {"load_1min_before": load_1min()}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-probes-") as tmp:
        out["lines"] = lines(Path(tmp) / "lines", args.lines, args.seed)
        print(json.dumps(out["lines"]), file=sys.stderr)
        if not args.stops:
            return
        out["stopped"] = stopped(Path(tmp) / "stopped", args.stops)
        print(json.dumps(out["stopped"]), file=sys.stderr)
    out["load_1min_after"] = load_1min()
    write_results(args, out)


if __name__ == "__main__":
    main()
