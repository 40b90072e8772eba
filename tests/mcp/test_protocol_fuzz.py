"""Random and malformed messages over stdio and over Streamable HTTP: each gets a reply, and
search works at the end. The long form is scripts/fuzz_protocol.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from support.mcp_harness import server_env, start_http, stop_http
from support.protocol_fuzz import HttpPeer, StdioPeer, requests

from pocketmcp.mcp.http import MAX_BODY_BYTES, Screened


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
         ) -> Iterator[StdioPeer]:
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


@pytest.fixture(scope="module")
def http_peer(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
              ) -> Iterator[HttpPeer]:
    root = tmp_path_factory.mktemp("fuzz_http")
    (root / "kb").mkdir()
    (root / "kb" / "bikes.md").write_text("# Bicycles\n\nPatch the inner tube of a tyre.\n")
    server = start_http(root)
    peer = HttpPeer(server.url, server.token)
    try:
        peer.handshake()
        yield peer
    finally:
        peer.close()
        assert stop_http(server) == 0, server.stderr()[-3000:]


@pytest.mark.parametrize(("body", "code", "ident"), [
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600, None),  # a batch
    (b"[]", -32600, None),
    (b"42", -32600, None),
    (b'"ping"', -32600, None),
    (b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}', -32600, 7),
    (b'{"id": 8, "method": "ping"}', -32600, 8),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": [], "method": "tools/list"}', -32600, None),
    (b'{"jsonrpc": "2.0", "id": 9, "method": 5}', -32600, 9),
    (b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": 3}', -32600, 10),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700, None),
    (b"\xff\xfe garbage", -32700, None),
    (b"[" * 100_000 + b"]" * 100_000, -32700, None),
])
def test_http_bodies_that_are_not_one_json_rpc_message_get_the_error_they_deserve(
        http_peer: HttpPeer, body: bytes, code: int, ident: Any) -> None:
    reply = http_peer.exchange(body)
    assert reply["id"] == ident and reply["error"]["code"] == code, reply


@settings(max_examples=100, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(request=requests())
def test_every_random_or_malformed_http_request_gets_a_reply(
        http_peer: HttpPeer, request: tuple[str, bytes, Any]) -> None:
    http_peer.check(*request)


def test_search_still_works_over_http_after_the_fuzzing(http_peer: HttpPeer) -> None:
    found = http_peer.request(10**6, "tools/call", {"name": "search", "arguments": {
        "query": "repair a punctured bicycle tyre", "top_k": 3}})
    assert found["result"].get("isError") is not True, found
    paths = [m["path"] for m in found["result"]["structuredContent"]["matches"]]
    assert "bikes.md" in paths, json.dumps(found)[:500]


@pytest.mark.parametrize("kind", [b"application/json", b"text/plain"])
async def test_an_http_body_over_the_limit_is_answered_without_being_read_whole(
        kind: bytes) -> None:
    """Chunked, of any content type: the JSON 413, after reading just past the limit."""
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope)

    screened = Screened(app, max_bytes=1000)
    chunks = [{"type": "http.request", "body": b"x" * 600, "more_body": True}] * 100
    received: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        received.append(1)
        return chunks[len(received) - 1]

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp",
             "headers": [(b"content-type", kind)]}
    await screened(scope, receive, send)
    assert not seen and len(received) == 2
    assert sent[0]["status"] == 413
    assert (b"content-type", b"application/json") in sent[0]["headers"]
    reply = json.loads(sent[1]["body"])
    assert reply["id"] is None and reply["error"]["code"] == -32700
    assert "1000 bytes" in reply["error"]["message"]


def test_sse_message_bodies_are_screened_and_good_ones_still_reach_the_session(
        http_peer: HttpPeer) -> None:
    auth = {"Authorization": http_peer.headers["Authorization"]}
    with http_peer.client.stream("GET", "/sse", headers=auth) as stream:
        lines = stream.iter_lines()
        endpoint = next(line[5:].strip() for line in lines if line.startswith("data:"))
        assert endpoint.startswith("/messages/?session_id="), endpoint
        for body, code in [(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600),
                           (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', -32700),
                           (b"x" * (MAX_BODY_BYTES + 1), -32700)]:
            refused = http_peer.client.post(endpoint, content=body, headers=auth)
            assert refused.status_code in (400, 413), refused.text[:300]
            assert refused.json()["error"]["code"] == code, refused.text[:300]
        good = {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "screen-check", "version": "1"}}}
        accepted = http_peer.client.post(endpoint, json=good, headers=auth)
        assert accepted.status_code == 202, accepted.text[:300]
        reply = next(json.loads(line[5:]) for line in lines if line.startswith("data:"))
        assert reply["id"] == 5 and "result" in reply, reply
