"""The HTTP face against hostile requests, on a real server on 127.0.0.1: any /doc/ path that
names no document is a 404, host names compare without case, one body limit answered with
JSON, slow request heads cut off, and no short token for a server reachable from elsewhere."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from support.mcp_harness import HttpServer, server_env, start_http, stop_http
from support.protocol_fuzz import HttpPeer

MAX_BODY_BYTES = 64 * 1024 * 1024  # the documented limit
HEADER_TIMEOUT_S = 10.0  # the documented time for a request's head


@pytest.fixture
def server(tmp_path: Path, processes: dict[str, str]) -> Iterator[HttpServer]:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# Bread\n\nSourdough bread.\n")
    running = start_http(tmp_path)
    try:
        yield running
    finally:
        stop_http(running)


NOT_DOCUMENTS = ["99999999999999999999999999", str(2**63), "0", "-5", "1_0", "\u0663",
                 "abc", "1e3", "%20", "1.0", "0x1", "9" * 400]


def test_any_doc_path_that_names_no_document_is_a_404(server: HttpServer) -> None:
    with httpx2.Client(trust_env=False, headers=server.auth, timeout=30) as http:
        assert http.get(server.url + "/doc/1").status_code == 200
        for name in NOT_DOCUMENTS:
            for tail in ("", "/file", "/delete"):
                answer = http.get(f"{server.url}/doc/{name}{tail}")
                assert answer.status_code == 404, (name, tail, answer.status_code)


def test_host_names_compare_without_case(server: HttpServer) -> None:
    with httpx2.Client(trust_env=False, headers=server.auth, timeout=30) as http:
        for host in (f"LOCALHOST:{server.port}", f"LocalHost:{server.port}"):
            answer = http.get(server.url + "/tools", headers={"Host": host})
            assert answer.status_code == 200, (host, answer.text)
        refused = http.get(server.url + "/tools", headers={"Host": f"EVIL.example:{server.port}"})
        assert refused.status_code == 421 and refused.json()["error"] == "invalid_host"


def _answered(got: bytes) -> bool:
    """Whether `got` holds a whole answer: its head and the body its Content-Length says."""
    head, sep, body = got.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _raw(server: HttpServer, data: bytes, wait_s: float, *, answer: bool = False
         ) -> tuple[bytes, float]:
    """Send `data` on a fresh connection; what comes back until it closes (with `answer`:
    until a whole answer has come; the server may keep the connection a while after a
    refusal it sent before the body), and when."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait_s) as conn:
        conn.sendall(data)
        got = b""
        try:
            while not (answer and _answered(got)) and (chunk := conn.recv(65536)):
                got += chunk
        except TimeoutError:
            pass
    return got, time.monotonic() - started


def test_one_body_limit_answered_with_json(server: HttpServer) -> None:
    peer = HttpPeer(server.url, server.token)
    try:
        peer.handshake()
        # a valid message of 5 MiB: over the SDK's own default, under the documented limit
        big = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "bread " * (5 * 1024 * 1024 // 6)}}}
        answer = peer.client.post("/mcp", headers=peer.headers, json=big, timeout=120)
        assert answer.status_code == 200, answer.text[:300]
        assert "jsonrpc" in answer.text
    finally:
        peer.close()
    # over the limit: a JSON 413 before the body is read, whatever the path
    for path in ("/mcp", "/messages/", "/tools"):
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n").encode()
        got, _ = _raw(server, head + b"{", 30, answer=True)
        status, _, rest = got.partition(b"\r\n")
        assert b" 413 " in status, got[:300]
        body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
        if path == "/tools":
            assert body["error"] == "request_too_large" and "MiB" in body["error_description"]
        else:  # the MCP endpoints answer as JSON-RPC
            assert f"at most {MAX_BODY_BYTES} bytes" in body["error"]["message"], body


def test_a_request_head_that_never_ends_is_cut_off(server: HttpServer) -> None:
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: ".encode()
    got, took = _raw(server, head, HEADER_TIMEOUT_S + 20)
    assert b" 408 " in got.partition(b"\r\n")[0], got[:300]
    assert took < HEADER_TIMEOUT_S + 5
    # a slow client does not hold the others back
    assert httpx2.get(server.url + "/health", trust_env=False, timeout=5).status_code == 200


@pytest.mark.parametrize("token", ["zq", "qzqzqzqzqzqzqzq"])
@pytest.mark.usefixtures("processes")
def test_a_short_token_is_refused_beyond_loopback(tmp_path: Path, token: str) -> None:
    """192.0.2.1 is a documentation address this machine does not have: the server must
    refuse the token before it tries to listen there."""
    (tmp_path / "kb").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--host",
         "192.0.2.1", "--port", "0"], env=server_env(tmp_path, POCKETMCP_TOKEN=token),
        cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr[-1000:]
    assert "POCKETMCP_TOKEN" in done.stderr and "at least 16 characters" in done.stderr
    assert token not in done.stderr  # never shown


@pytest.mark.usefixtures("processes")
def test_a_short_token_is_still_accepted_on_loopback(tmp_path: Path) -> None:
    running = start_http(tmp_path, POCKETMCP_TOKEN="x")
    try:
        answer = httpx2.get(running.url + "/tools", trust_env=False, timeout=30,
                            headers={"Authorization": "Bearer x"})
        assert answer.status_code == 200
    finally:
        stop_http(running)
