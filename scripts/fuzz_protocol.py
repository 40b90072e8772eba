"""The long form of the protocol fuzzer: N random and malformed messages (default 1000) sent
to a real server over stdio (one a line) and over Streamable HTTP (one a POST), each of which
must be answered; then a search must find a file of the folder. Prints the counts.

    .venv/bin/python scripts/fuzz_protocol.py [N] [--transport stdio|http|both]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from support.mcp_harness import server_env, start_http, stop_http  # noqa: E402
from support.protocol_fuzz import HttpPeer, StdioPeer, requests  # noqa: E402

KINDS = ("request", "tool", "bad_envelope", "json", "bytes")


def fuzz(peer: StdioPeer | HttpPeer, count: int) -> bool:
    """Send `count` generated messages, then search; whether the search found the file."""
    peer.handshake()

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(request=requests())
    def run(request: tuple[str, bytes, Any]) -> None:
        peer.check(*request)

    run()
    deadline = time.monotonic() + 60
    while not peer.request(10**6 - 1, "tools/call", {"name": "status", "arguments": {}})[
            "result"]["structuredContent"]["initial_indexing_done"]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    found = peer.request(10**6, "tools/call", {"name": "search", "arguments": {
        "query": "repair a punctured bicycle tyre", "top_k": 3}})
    matches = found["result"]["structuredContent"]["matches"]
    return any(m["path"] == "bikes.md" for m in matches)


def report(transport: str, peer: StdioPeer | HttpPeer, seconds: float, search_ok: bool,
           code: int) -> None:
    sent = sum(peer.counts[k] for k in KINDS)
    print(f"{transport}: messages sent and answered: {sent} in {seconds:.1f} s")
    for key in (*KINDS, "result", "error"):
        print(f"  {key}: {peer.counts[key]}")
    print(f"  search after fuzzing found the file: {search_ok}; exit code {code}")


def folder(root: Path) -> None:
    (root / "kb").mkdir()
    (root / "kb" / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a tyre.\n")


def over_stdio(count: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder(root)
        peer = StdioPeer(root, server_env(root))
        started = time.perf_counter()
        try:
            search_ok = fuzz(peer, count)
        finally:
            code = peer.close()
        report("stdio", peer, time.perf_counter() - started, search_ok, code)
        return search_ok and code == 0


def over_http(count: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder(root)
        server = start_http(root)
        peer = HttpPeer(server.url, server.token)
        started = time.perf_counter()
        try:
            search_ok = fuzz(peer, count)
        finally:
            peer.close()
            code = stop_http(server)
        report("http", peer, time.perf_counter() - started, search_ok, code)
        return search_ok and code == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=1000)
    parser.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    args = parser.parse_args()
    ok = True
    if args.transport in ("stdio", "both"):
        ok = over_stdio(args.count) and ok
    if args.transport in ("http", "both"):
        ok = over_http(args.count) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
