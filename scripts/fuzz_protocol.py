"""The long form of the protocol fuzzer: N random and malformed lines sent to a real server
over stdio (default 1000), each of which must be answered; then a search must find a file
of the folder. Prints the counts.

    .venv/bin/python scripts/fuzz_protocol.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from mcp_harness import server_env  # noqa: E402
from protocol_fuzz import StdioPeer, requests  # noqa: E402


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kb").mkdir()
        (root / "kb" / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a tyre.\n")
        peer = StdioPeer(root, server_env(root))
        started = time.perf_counter()
        try:
            peer.handshake()

            @settings(max_examples=count, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(request=requests())
            def fuzz(request: tuple[str, bytes, object]) -> None:
                peer.check(*request)

            fuzz()
            deadline = time.monotonic() + 60
            while not peer.request(10**6 - 1, "tools/call", {"name": "status", "arguments": {}})[
                    "result"]["structuredContent"]["initial_indexing_done"]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            found = peer.request(10**6, "tools/call", {"name": "search", "arguments": {
                "query": "repair a punctured bicycle tyre", "top_k": 3}})
            matches = found["result"]["structuredContent"]["matches"]
            search_ok = any(m["path"] == "bikes.md" for m in matches)
        finally:
            code = peer.close()
        lines = sum(peer.counts[k] for k in ("request", "tool", "bad_envelope", "json", "bytes"))
        print(f"lines sent and answered: {lines} in {time.perf_counter() - started:.1f} s")
        for key in ("request", "tool", "bad_envelope", "json", "bytes", "result", "error"):
            print(f"  {key}: {peer.counts[key]}")
        print(f"search after fuzzing found the file: {search_ok}; exit code {code}")
        return 0 if search_ok and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
