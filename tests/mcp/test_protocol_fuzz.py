"""Random and malformed lines over stdio: each gets a reply, and search works at the end.
The long form is scripts/fuzz_protocol.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from mcp_harness import server_env
from protocol_fuzz import StdioPeer, requests


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioPeer]:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "kb").mkdir()
    (root / "kb" / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a tyre.\n")
    server = StdioPeer(root, server_env(root))
    try:
        server.handshake()
        yield server
    finally:
        server.close()


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(request=requests())
def test_every_random_or_malformed_line_gets_a_reply(peer: StdioPeer,
                                                     request: tuple[str, bytes, Any]) -> None:
    peer.check(*request)


def test_search_still_works_after_the_fuzzing(peer: StdioPeer) -> None:
    deadline = time.monotonic() + 60
    while not peer.request(10**6 - 1, "tools/call", {"name": "status", "arguments": {}})[
            "result"]["structuredContent"]["initial_indexing_done"]:
        assert time.monotonic() < deadline, "the first scan did not end"
        time.sleep(0.05)
    found = peer.request(10**6, "tools/call", {"name": "search", "arguments": {
        "query": "repair a punctured bicycle tyre", "top_k": 3}})
    assert found["result"].get("isError") is not True, found
    paths = [m["path"] for m in found["result"]["structuredContent"]["matches"]]
    assert "bikes.md" in paths, json.dumps(found)[:500]
    assert peer.process.poll() is None
