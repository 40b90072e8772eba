"""A property-based fuzzer of the protocol over stdio and Streamable HTTP: random and
malformed messages sent to a real server, each of which must be answered.

Used by tests/mcp/test_protocol_fuzz.py (a short run) and scripts/fuzz_protocol.py (the long
form, which prints its counts). Every generated line deserves a reply: requests carry an id,
and lines that are not valid JSON-RPC get a JSON-RPC error.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx2
from hypothesis import strategies as st

REPLY_TIMEOUT_S = 30.0

_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) \
    | st.text(max_size=20)
json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12)

_methods = st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "resources/list",
                            "resources/read", "prompts/list", "no/such/method", ""])
_tools = st.sampled_from(["search", "get_document", "list_documents", "list_libraries",
                          "status", "get_chunk", "upsert_documents", "delete_documents", "nope"])
_arguments = st.fixed_dictionaries({}, optional={
    "query": st.text(max_size=30) | json_values,
    "top_k": st.integers(-5, 10**20) | json_values,
    "doc_id": st.integers(-(2**70), 2**70) | json_values,
    "doc_ids": st.lists(st.integers(-(2**70), 2**70), max_size=3) | json_values,
    "score_threshold": st.floats() | json_values,
    "library": st.sampled_from(["../../etc", "", "a" * 200, "default"]) | st.text(max_size=12),
    "limit": st.integers(-5, 10**12),
    "cursor": st.text(max_size=20),
    "docs": st.lists(st.fixed_dictionaries({"text": st.text(min_size=1, max_size=80)},
                                           optional={"external_id": st.text(max_size=10)}),
                     max_size=2) | json_values,
})


@st.composite
def _tool_call(draw: st.DrawFn) -> dict[str, Any]:
    return {"name": draw(_tools), "arguments": draw(_arguments | json_values)}


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, bytes, Any]:
    """(kind, line, expected reply id or None when the reply's id must be null) of one line
    that deserves a reply."""
    ident: Any = draw(st.integers(1, 2**62) | st.text(min_size=1, max_size=12))
    kind = draw(st.sampled_from(["request", "tool", "bad_envelope", "json", "bytes"]))
    if kind == "request":
        message: Any = {"jsonrpc": "2.0", "id": ident, "method": draw(_methods)}
        if draw(st.booleans()):
            message["params"] = draw(json_values)
        return kind, json.dumps(message).encode(), ident
    if kind == "tool":
        message = {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                   "params": draw(_tool_call())}
        return kind, json.dumps(message).encode(), ident
    if kind == "bad_envelope":
        message = {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}
        fault = draw(st.sampled_from(["version", "id", "method", "no_method"]))
        if fault == "version":
            message["jsonrpc"] = draw(st.sampled_from(["1.0", "2", 2.0, None]))
        elif fault == "id":
            message["id"] = draw(st.sampled_from([{}, [], 1.5, True, None, {"a": 1}]))
            ident = None
        elif fault == "method":
            message["method"] = draw(json_values.filter(lambda v: not isinstance(v, str)))
        else:
            del message["method"]
        return kind, json.dumps(message).encode(), ident
    if kind == "json":  # any JSON value but an object: arrays (batches), numbers, strings...
        value = draw(json_values.filter(lambda v: not isinstance(v, dict)))
        return kind, json.dumps(value).encode(), None
    raw = draw(st.binary(min_size=1, max_size=200).filter(
        lambda b: b"\n" not in b and b.strip() != b"" and not b.lstrip().startswith(b"{")))
    return kind, raw, None


class Peer:
    """What both transports' peers share: requests, the handshake's first half, and the
    check of one generated message's reply."""

    counts: Counter[str]

    def exchange(self, line: bytes) -> dict[str, Any]:
        raise NotImplementedError

    def request(self, ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.exchange(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                         "params": params}).encode())

    def initialize(self) -> dict[str, Any]:
        init = self.request(0, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"}})
        assert init["result"]["serverInfo"]["name"] == "pocketmcp"
        return init

    def answered(self, kind: str, line: bytes, ident: Any) -> dict[str, Any]:
        """Send one generated message; its reply must come, with the id it deserves."""
        reply = self.exchange(line)
        assert ("result" in reply) != ("error" in reply), reply
        assert reply["id"] == ident, (line[:200], reply)
        self.counts[kind] += 1
        self.counts["error" if "error" in reply else "result"] += 1
        return reply


class StdioPeer(Peer):
    """A real server process driven line by line, with a deadline on every reply."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        (root / "kb").mkdir(exist_ok=True)
        self.errlog = open(root / "server.err", "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pocketmcp"], env=env, cwd=root, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errlog)
        self._buffer = b""
        self.counts: Counter[str] = Counter()

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no reply within the time limit"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, "the server closed its stdout"
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line.decode("utf-8"))
        assert message.get("jsonrpc") == "2.0", message
        return message

    def exchange(self, line: bytes) -> dict[str, Any]:
        self.send(line)
        return self.reply()

    def handshake(self) -> None:
        self.initialize()
        self.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def check(self, kind: str, line: bytes, ident: Any) -> None:
        """Send one generated line; its reply must come, with the id it deserves."""
        assert self.process.poll() is None, "the server died"
        self.answered(kind, line, ident)

    def close(self) -> int:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            code = self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.errlog.close()
        return code


class HttpPeer(Peer):
    """A real server over Streamable HTTP, one POST per generated message, with a deadline
    on every reply: a JSON-RPC error in the response body, or the reply in its event stream."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx2.Client(base_url=url, trust_env=False, timeout=httpx2.Timeout(
            REPLY_TIMEOUT_S))
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.counts: Counter[str] = Counter()

    def exchange(self, body: bytes) -> dict[str, Any]:
        """POST `body`; the JSON-RPC message that answers it."""
        with self.client.stream("POST", "/mcp", content=body, headers=self.headers) as response:
            kind = response.headers.get("content-type", "")
            if not kind.startswith("text/event-stream"):
                response.read()
                assert kind.startswith("application/json"), (response.status_code, kind,
                                                              response.text[:300])
                message: dict[str, Any] = response.json()
                assert message.get("jsonrpc") == "2.0", message
                return message
            if "mcp-session-id" in response.headers:
                self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            pending = ""
            for text in response.iter_text():
                # SSE lines end at CR or LF only (str.splitlines would also cut at U+0085,
                # U+2028 and others, which JSON strings may hold as they are).
                pending += text.replace("\r\n", "\n").replace("\r", "\n")
                *lines, pending = pending.split("\n")
                for line in lines:
                    if not line.startswith("data:") or not line[5:].strip():
                        continue
                    event = json.loads(line[5:])
                    if "result" in event or "error" in event:
                        assert event.get("jsonrpc") == "2.0", event
                        return event  # type: ignore[no-any-return]
        raise AssertionError(f"the event stream ended without a reply to {body[:200]!r}")

    def handshake(self) -> None:
        init = self.initialize()
        self.headers["mcp-protocol-version"] = init["result"]["protocolVersion"]
        sent = self.client.post("/mcp", headers=self.headers, content=json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        assert sent.status_code == 202, sent.text

    def check(self, kind: str, body: bytes, ident: Any) -> None:
        """Send one generated message; its reply must come, with the id it deserves."""
        reply = self.answered(kind, body, ident)
        if ident is None:  # not a JSON-RPC message at all: parse error or invalid request
            assert reply["error"]["code"] in (-32700, -32600), (body[:200], reply)

    def close(self) -> None:
        self.client.close()
