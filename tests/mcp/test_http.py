"""One real server over HTTP (a subprocess on 127.0.0.1), driven by the SDK's Streamable HTTP
and SSE clients and by plain HTTP requests: the tools, the token, Host and Origin, the
manifest, progress, and many clients at once."""

from __future__ import annotations

import json
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support.mcp_harness import STOP_BOUND_S, HttpServer, call, server_env, start_http, stop_http

from pocketmcp.mcp import discovery
from pocketmcp.store.places import at_file

A = "# Sourdough\n\nA wild yeast starter leavens sourdough bread; feed it flour and water.\n"
B = "# Kubernetes\n\nA Service gives pods a stable virtual IP address and a DNS name.\n"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
           ) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("http")
    (root / "kb").mkdir()
    (root / "kb" / "bread.md").write_text(A)
    (root / "kb" / "infra.md").write_text(B)
    served = start_http(root)  # no POCKETMCP_TOKEN: the server makes one
    try:
        yield served
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]
        assert served.token not in served.stderr()  # after every test of the module


def probe(server: HttpServer, method: str, path: str, headers: dict[str, str] | None = None,
          **kw: Any) -> httpx2.Response:
    """One request; an event stream is read up to its first event only."""
    with httpx2.Client(base_url=server.url, timeout=10, trust_env=False) as client, \
            client.stream(method, path, headers=headers or {}, **kw) as response:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for chunk in response.iter_bytes():
                if b"\n\n" in chunk or b"\r\n\r\n" in chunk:
                    break
        else:
            response.read()
        return response


def test_the_generated_token_is_private_and_the_discovery_file_names_the_server(
        server: HttpServer) -> None:
    index = at_file(server.root / "data" / "index.db")
    token_file = discovery.token_file(index)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(server.token) >= 32
    assert stat.S_IMODE(discovery.server_file(index).stat().st_mode) == 0o600
    published = discovery.find(index)
    assert published is not None and published.pid == server.process.pid
    assert published.token_file == str(token_file.resolve())
    assert server.token not in server.stderr()  # stderr is no terminal: the path only
    assert str(token_file) in server.stderr()


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_sdk_clients_list_search_upsert_read_and_reindex_with_progress(
        server: HttpServer, transport: str) -> None:
    with anyio.fail_after(60):
        async with server.session(transport) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"search", "upsert_documents", "reindex", "status"} <= tools
            found = await call(session, "search", {"query": "sourdough starter", "top_k": 1})
            assert found["matches"][0]["path"] == "bread.md"

            ext = f"note-{transport}"
            added = await call(session, "upsert_documents", {"docs": [
                {"text": f"Tardigrades ({transport}) survive the vacuum of space.",
                 "external_id": ext}]})
            assert added["results"][0]["status"] == "inserted"
            top = (await call(session, "search", {
                "query": f"tardigrades {transport} in space", "top_k": 1}))["matches"][0]
            assert top["doc_id"] == added["results"][0]["doc_id"]
            chunk = json.loads((await session.read_resource(top["resource"])).contents[0].text)
            assert chunk["text"] == f"Tardigrades ({transport}) survive the vacuum of space."

            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None
                                  ) -> None:
                progress.append(done)

            result = await session.call_tool("reindex", {"force": True},
                                             progress_callback=on_progress)
            assert not result.is_error and result.structured_content is not None
            assert result.structured_content["files_updated"] == 2
            assert progress, "no progress notification arrived"


def test_requests_without_or_with_a_wrong_token_get_401_json(server: HttpServer) -> None:
    targets = [("POST", "/mcp", {"json": INIT, "headers": {
                   "Accept": "application/json, text/event-stream"}}),
               ("GET", "/sse", {}), ("POST", "/messages/?session_id=" + "0" * 32,
                                     {"json": INIT}),
               ("GET", "/tools", {}), ("GET", "/no-such-page", {})]
    for method, path, kw in targets:
        extra = kw.pop("headers", {})
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"}):
            response = probe(server, method, path, {**extra, **auth}, **kw)
            assert response.status_code == 401, (method, path, auth)
            assert response.headers["content-type"] == "application/json"
            body = response.json()
            assert body["error"] == "invalid_token"
            assert "bearer token" in body["error_description"]
            assert response.headers["www-authenticate"].startswith("Bearer ")
        ok = probe(server, method, path, {**extra, **server.auth}, **kw)
        assert ok.status_code != 401
    for path in ("/health", "/health/ready"):
        response = probe(server, "GET", path)
        assert response.status_code == 200 and response.json()["ready"] is True


async def test_sdk_clients_with_a_wrong_token_are_refused(server: HttpServer) -> None:
    wrong = {"Authorization": "Bearer wrong"}
    with anyio.fail_after(20), pytest.raises(httpx2.HTTPStatusError, match="401"):
        async with sse_client(server.url + "/sse", headers=wrong):
            pass
    with anyio.fail_after(20), pytest.raises((MCPError, BaseExceptionGroup)):
        async with httpx2.AsyncClient(headers=wrong, trust_env=False) as http, \
                streamable_http_client(server.url + "/mcp", http_client=http) as (r, w), \
                ClientSession(r, w) as session:
            await session.initialize()


def test_a_forged_host_or_origin_is_refused_on_every_path(server: HttpServer) -> None:
    paths = [("POST", "/mcp", {"json": INIT}), ("GET", "/sse", {}),
             ("POST", "/messages/?session_id=" + "0" * 32, {"json": INIT}),
             ("GET", "/tools", {}), ("GET", "/health", {}), ("GET", "/health/ready", {})]
    accept = {"Accept": "application/json, text/event-stream"}
    for method, path, kw in paths:
        for token in ({}, server.auth):
            for host in ("evil.example", f"127.0.0.1:{server.port + 1}", "127.0.0.1"):
                response = probe(server, method, path, {**accept, **token, "Host": host}, **kw)
                assert response.status_code == 421, (path, host)
                assert response.json()["error"] == "invalid_host"
            for origin in ("http://evil.example", "null", f"http://127.0.0.1:{server.port + 1}"):
                response = probe(server, method, path, {**accept, **token, "Origin": origin},
                                 **kw)
                assert response.status_code == 403, (path, origin)
                assert response.json()["error"] == "invalid_origin"
                assert "access-control-allow-origin" not in response.headers
    for host, origin in ((f"localhost:{server.port}", f"http://localhost:{server.port}"),
                         (f"127.0.0.1:{server.port}", f"http://127.0.0.1:{server.port}")):
        response = probe(server, "GET", "/tools", {**server.auth, "Host": host,
                                                   "Origin": origin})
        assert response.status_code == 200
        assert "access-control-allow-origin" not in response.headers


async def test_get_tools_equals_tools_list(server: HttpServer) -> None:
    manifest = probe(server, "GET", "/tools", server.auth).json()["tools"]
    with anyio.fail_after(30):
        async with server.session() as session:
            listed = (await session.list_tools()).tools
    wire = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed]
    assert manifest == wire
    search = next(t for t in manifest if t["name"] == "search")
    assert {"name", "description", "inputSchema", "outputSchema"} <= set(search)


async def test_progress_of_a_reindex_reaches_only_the_client_that_asked(
        server: HttpServer) -> None:
    seen_by_other: list[Any] = []

    async def other_handler(message: Any) -> None:
        seen_by_other.append(message)

    with anyio.fail_after(60):
        async with server.session("http") as asker, \
                server.session("sse", message_handler=other_handler) as other, \
                server.session("http", message_handler=other_handler) as third:
            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None
                                  ) -> None:
                progress.append(done)

            result = await asker.call_tool("reindex", {"force": True},
                                           progress_callback=on_progress)
            assert not result.is_error
            await call(other, "status")
            await call(third, "status")
    assert progress
    assert not [m for m in seen_by_other if "progress" in repr(m).lower()]


async def test_writes_from_many_sessions_at_once_all_land(server: HttpServer) -> None:
    async def write(transport: str, n: int) -> None:
        async with server.session(transport) as session:
            for i in range(3):
                await call(session, "upsert_documents", {"docs": [{
                    "text": f"Parallel note {n}-{i} about orchard number {n * 10 + i}.",
                    "external_id": f"par-{n}-{i}", "metadata": {"batch": "parallel"}}]})

    with anyio.fail_after(90):
        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(write, "http" if n % 2 else "sse", n)
        async with server.session() as session:
            listed = await call(session, "list_documents", {
                "page": {"limit": 500}, "metadata": {"batch": "parallel"}})
    assert sorted(d["external_id"] for d in listed["documents"]) == sorted(
        f"par-{n}-{i}" for n in range(6) for i in range(3))


async def test_a_client_that_never_reads_its_stream_does_not_stall_the_others(
        server: HttpServer) -> None:
    """The stalled client asks for more than the socket buffers hold (900 tools/list answers
    of about 13 KB) and reads nothing; the others are answered meanwhile, and the stalled
    one still gets every answer once it reads."""
    asked = 900
    with anyio.fail_after(90):
        stream = await anyio.connect_tcp("127.0.0.1", server.port)
        async with stream:
            await stream.send((f"GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                               f"Authorization: Bearer {server.token}\r\n"
                               "Accept: text/event-stream\r\n\r\n").encode())
            received = b""
            while b"session_id=" not in received or not received.endswith(b"\r\n\r\n"):
                received += await stream.receive()
            endpoint = received.split(b"data: ")[1].split(b"\r\n")[0].decode()
            async with httpx2.AsyncClient(base_url=server.url, headers=server.auth,
                                          trust_env=False, timeout=30) as poster:
                await poster.post(endpoint, json=INIT)
                await poster.post(endpoint, json={"jsonrpc": "2.0",
                                                  "method": "notifications/initialized"})

                async def ask(first: int) -> None:
                    for i in range(first, asked, 20):
                        sent = await poster.post(endpoint, json={
                            "jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"})
                        assert sent.status_code == 202

                async with anyio.create_task_group() as tg:
                    for first in range(20):
                        tg.start_soon(ask, first)
            async with server.session("http") as http_client, \
                    server.session("sse") as sse_session:
                with anyio.fail_after(15):
                    for session in (http_client, sse_session):
                        found = await call(session, "search", {"query": "kubernetes pods"})
                        assert found["matches"][0]["path"] == "infra.md"
                        await call(session, "upsert_documents", {"docs": [{
                            "text": "Written while another client stalls.",
                            "external_id": f"while-stalled-{id(session)}"}]})
            answers = 0
            while answers < asked + 1:  # initialize and every tools/list
                chunk = await stream.receive()
                received += chunk
                answers = received.count(b"event: message")
    assert len(received) > asked * 12_000


def test_the_health_routes_need_no_token_and_show_no_paths(server: HttpServer) -> None:
    body = probe(server, "GET", "/health").json()
    assert body["alive"] is True and body["role"] == "writer"
    assert str(server.root) not in json.dumps(body)


def test_a_second_http_server_on_the_same_index_refuses_to_start(server: HttpServer) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--port", "0"],
        env=server_env(server.root), cwd=server.root, capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 1
    assert "already serves" in done.stderr
    assert server.url in done.stderr
    taken = subprocess.run(
        [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--port",
         str(server.port)], env=server_env(server.root / "elsewhere"), cwd=server.root,
        capture_output=True, text=True, timeout=60)
    assert taken.returncode == 1 and f"cannot listen on 127.0.0.1:{server.port}" in taken.stderr


@pytest.mark.usefixtures("processes")
async def test_sigterm_stops_the_server_promptly_with_work_committed(
        tmp_path: Path) -> None:
    """Sessions over both transports and a bridge are open when the signal comes; the
    bridge notices its server went away (a server is looked for at its next request) and
    ends when its client closes stdin."""
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "bread.md").write_text(A)
    served = start_http(tmp_path)
    index = tmp_path / "data" / "index.db"
    try:
        with anyio.fail_after(60), open(tmp_path / "bridge.err", "wb") as bridge_err:
            async with await anyio.open_process(
                    [sys.executable, "-m", "pocketmcp"], env=server_env(tmp_path, SHARE="on"),
                    cwd=tmp_path, stderr=bridge_err) as bridge:
                assert bridge.stdin is not None and bridge.stdout is not None
                await bridge.stdin.send(json.dumps(INIT).encode() + b"\n")
                answer = b""
                while b"\n" not in answer:
                    answer += await bridge.stdout.receive()
                assert json.loads(answer)["result"]["serverInfo"]["name"] == "pocketmcp"
                async with served.session("sse") as sse, served.session("http") as http:
                    await call(sse, "upsert_documents", {"docs": [{
                        "text": "Committed before the signal, over SSE.", "external_id": "sse"}]})
                    await call(http, "upsert_documents", {"docs": [{
                        "text": "Committed before the signal, over HTTP.",
                        "external_id": "http"}]})
                    started = time.monotonic()
                    served.process.send_signal(signal.SIGTERM)  # every session still open
                    while served.process.poll() is None:
                        elapsed = time.monotonic() - started
                        assert elapsed < STOP_BOUND_S, "still running after SIGTERM"
                        await anyio.sleep(0.05)
                while '"server_gone"' not in (tmp_path / "bridge.err").read_text():
                    assert bridge.returncode is None
                    await anyio.sleep(0.05)
                await bridge.stdin.aclose()
                assert await bridge.wait() == 0
    finally:
        code = stop_http(served)
    assert code == 0, served.stderr()[-3000:]
    assert '"event": "stopped"' in served.stderr()
    assert not discovery.server_file(at_file(index)).exists()
    with sqlite3.connect(index) as db:
        stored = {row[0] for row in db.execute("SELECT external_id FROM documents")}
    assert {"sse", "http", "file:bread.md"} <= stored
