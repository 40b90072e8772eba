"""The bridge as strict as the server: the same hostile lines sent to a bridge (relaying to
the HTTP server of its index) and to a process serving alone get the same answers, and
nothing a client sends ends the bridge."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.mcp_harness import HttpServer, server_env, start_http, stop_http
from support.protocol_fuzz import StdioPeer, json_values

from pocketmcp.mcp.lines import MAX_LINE_BYTES

_counter = itertools.count()


class Pair:
    """A bridge and a process serving alone, each after its handshake."""

    def __init__(self, bridge: StdioPeer, alone: StdioPeer, server: HttpServer) -> None:
        self.bridge = bridge
        self.alone = alone
        self.server = server

    def answers(self, line: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """What each sends back for `line`: the messages before the answer to a ping sent
        just after it (the bridge relays requests at once, so their answers may come in
        another order: it is waited for until it has sent as many), sorted."""
        sentinel = f"sentinel-{next(_counter)}"
        got: list[list[dict[str, Any]]] = []
        for peer in (self.alone, self.bridge):
            assert peer.process.poll() is None, "the process ended"
            peer.send(line)
            peer.send(json.dumps({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode())
            seen: list[dict[str, Any]] = []
            pinged = False
            while not pinged or (got and len(seen) < len(got[0])):
                message = peer.reply()
                if message.get("id") == sentinel:
                    assert message == {"jsonrpc": "2.0", "id": sentinel, "result": {}}, message
                    pinged = True
                else:
                    seen.append(message)
            got.append(sorted(seen, key=json.dumps))
        return got[1], got[0]


def _started(root: Path, env: dict[str, str]) -> StdioPeer:
    peer = StdioPeer(root, env)  # its stderr in root / "server.err"
    peer.handshake()
    return peer


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
         ) -> Iterator[Pair]:
    shared = tmp_path_factory.mktemp("shared")
    alone_root = tmp_path_factory.mktemp("alone")
    for root in (shared, alone_root):
        (root / "kb").mkdir()
        (root / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews at 80 °C.\n")
    server = start_http(shared)
    peers: list[StdioPeer] = []
    try:
        peers.append(_started(shared, server_env(shared, SHARE="on")))
        peers.append(_started(alone_root, server_env(alone_root)))
        yield Pair(peers[0], peers[1], server)
        assert '"bridging"' in (shared / "server.err").read_text()  # it did relay
        assert '"bridging"' not in (alone_root / "server.err").read_text()
    finally:
        for peer in peers:
            peer.close()
        assert stop_http(server) == 0, server.stderr()[-3000:]


_ids = st.sampled_from([{}, [], {"a": 1}, [1, [2]], 1.5, True, None]) | json_values
_methods = st.sampled_from(["ping", "tools/list", "resources/list", "prompts/list",
                            "no/such/method", "", "notifications/initialized",
                            "notifications/cancelled"])


@st.composite
def hostile_lines(draw: st.DrawFn) -> bytes:
    """One line a careless or hostile client may send (never a tool call: the two indexes'
    contents are not compared here)."""
    kind = draw(st.sampled_from(["odd_id", "envelope", "json", "bytes", "truncated", "deep",
                                 "request"]))
    if kind == "odd_id":  # an id no reply can bear, in any message
        message: dict[str, Any] = {"id": draw(_ids), "method": draw(_methods)}
        if draw(st.booleans()):
            message["jsonrpc"] = "2.0"
        if draw(st.booleans()):
            message["params"] = draw(json_values)
        return json.dumps(message).encode()
    if kind == "envelope":  # valid JSON, not a valid JSON-RPC message
        message = {"jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2, None])),
                   "id": draw(st.integers(1, 99) | st.text(max_size=5)),
                   "method": draw(_methods | json_values)}
        for key in draw(st.sets(st.sampled_from(["jsonrpc", "id", "method"]))):
            del message[key]
        if draw(st.booleans()):
            message[draw(st.sampled_from(["params", "result", "error"]))] = draw(json_values)
        return json.dumps(message).encode()
    if kind == "json":  # any JSON value but an object: batches, numbers, strings
        return json.dumps(draw(json_values.filter(lambda v: not isinstance(v, dict)))).encode()
    if kind == "truncated":
        whole = json.dumps({"jsonrpc": "2.0", "id": 3, "method": draw(_methods)}).encode()
        return whole[:draw(st.integers(1, len(whole) - 1))]
    if kind == "deep":
        depth = draw(st.sampled_from([200, 2000, 20000]))
        return b"[" * depth + b"]" * depth
    if kind == "request":  # a valid request, with odd params
        message = {"jsonrpc": "2.0", "id": draw(st.integers(1, 99)), "method": draw(_methods)}
        if draw(st.booleans()):
            message["params"] = draw(json_values)
        return json.dumps(message).encode()
    return draw(st.binary(min_size=1, max_size=120).filter(lambda b: b"\n" not in b))


@settings(max_examples=120, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(line=hostile_lines())
def test_a_bridge_answers_every_hostile_line_as_a_process_serving_alone(
        pair: Pair, line: bytes) -> None:
    through_bridge, alone = pair.answers(line)
    assert through_bridge == alone, line[:300]


@pytest.mark.parametrize("line", [
    b'{"id": {"a": 1}, "method": "tools/list"}',
    b'{"jsonrpc": "2.0", "id": [1, 2], "method": "tools/list"}',
    b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "notifications/initialized"}',
    b'{"jsonrpc": "2.0", "id": 5, "method": ["tools/call"]}',
    b"this is not json",
    b"",
    b"   ",
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
    b'{"jsonrpc": "2.0", "id": 7, "result": 3}',
])
def test_lines_that_ended_a_bridge_are_answered_and_it_goes_on(pair: Pair, line: bytes
                                                                 ) -> None:
    through_bridge, alone = pair.answers(line)
    assert through_bridge == alone
    assert all(m["error"]["code"] in (-32700, -32600) for m in through_bridge)
    assert len(through_bridge) == (0 if not line.strip() else 1), through_bridge
    listed = pair.bridge.exchange(b'{"jsonrpc": "2.0", "id": "after", "method": "tools/list"}')
    assert listed["id"] == "after" and listed["result"]["tools"]


def test_a_line_over_the_size_limit_is_answered_as_alone(pair: Pair) -> None:
    line = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"x" * MAX_LINE_BYTES \
        + b'"}'
    through_bridge, alone = pair.answers(line)
    assert through_bridge == alone
    assert [m["error"]["code"] for m in through_bridge] == [-32700]
    assert str(MAX_LINE_BYTES) in through_bridge[0]["error"]["message"]
