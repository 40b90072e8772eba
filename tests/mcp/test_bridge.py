"""`pocketmcp serve` on stdio while an HTTP server of the same index runs: a bridge to it (no
model loaded), and serving on its own when there is nothing usable to bridge to."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from support.mcp_harness import (
    HttpServer,
    call,
    mcp_session,
    server_env,
    start_http,
    stop_http,
    until,
)

from pocketmcp.mcp import discovery
from pocketmcp.store.places import at_file

pytestmark = pytest.mark.usefixtures("processes")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, module_processes: dict[str, str]
           ) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("bridged")
    (root / "kb").mkdir()
    (root / "kb" / "tea.md").write_text("# Tea\n\nGreen tea brews best at 80 °C for two "
                                        "minutes.\n")
    served = start_http(root)
    try:
        yield served
    finally:
        assert stop_http(served) == 0, served.stderr()[-3000:]


def events(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("{")]


async def ids(session: Any) -> set[str]:
    listed = await call(session, "list_documents", {"page": {"limit": 500}})
    return {d["external_id"] for d in listed["documents"]}


async def test_two_stdio_bridges_and_an_http_client_see_each_others_writes(
        server: HttpServer) -> None:
    root = server.root
    with anyio.fail_after(90):
        async with mcp_session(root, stderr_name="one.err", SHARE="on") as one, \
                mcp_session(root, stderr_name="two.err", SHARE="on") as two, \
                server.session("http") as http:
            await call(one, "upsert_documents", {"docs": [
                {"text": "Bridge one writes about lighthouses.", "external_id": "one"}]})
            await call(two, "upsert_documents", {"docs": [
                {"text": "Bridge two writes about glaciers.", "external_id": "two"}]})
            await call(http, "upsert_documents", {"docs": [
                {"text": "The HTTP client writes about volcanoes.", "external_id": "http"}]})
            for session in (one, two, http):
                assert {"one", "two", "http"} <= await ids(session)
            top = (await call(two, "search", {"query": "lighthouse", "top_k": 1}))["matches"]
            assert "lighthouses" in top[0]["preview"]

            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None
                                  ) -> None:
                progress.append(done)

            result = await one.call_tool("reindex", {"force": True},
                                         progress_callback=on_progress)
            assert not result.is_error and progress
    for name in ("one.err", "two.err"):
        lines = events(root / name)
        assert any('"bridging"' in line and server.url in line for line in lines)
        assert not any('"event": "ready"' in line for line in lines)  # no model, no index
        assert any('"bridge_stopped"' in line and "stdin closed" in line for line in lines)


async def test_a_bridge_negotiates_the_same_protocol_era_as_a_direct_client(
        server: HttpServer) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp"],
                                   env=server_env(server.root, SHARE="on"),
                                   cwd=str(server.root))
    with anyio.fail_after(60), open(server.root / "auto.err", "w") as errlog:
        async with httpx2.AsyncClient(headers=server.auth, trust_env=False) as http, \
                Client(streamable_http_client(server.url + "/mcp", http_client=http),
                       mode="auto") as direct:
            era = direct.protocol_version
        async with Client(stdio_client(params, errlog=errlog), mode="auto") as bridged:
            found = await bridged.call_tool("search", {"query": "green tea", "top_k": 1})
            assert found.structured_content is not None
            assert found.structured_content["matches"][0]["path"] == "tea.md"
            assert bridged.protocol_version == era


async def test_a_bridge_without_the_right_token_serves_on_its_own(server: HttpServer) -> None:
    with anyio.fail_after(90):
        async with mcp_session(server.root, stderr_name="wrong.err", SHARE="on",
                               POCKETMCP_TOKEN="wrong") as session:
            status = await until(lambda: call(session, "status"),
                                 lambda s: s["role"] != "pending")
    assert status["role"] == "reader"  # the HTTP server holds the writer lock
    lines = events(server.root / "wrong.err")
    assert any('"not_sharing"' in line and "refused the POCKETMCP_TOKEN set here (HTTP 401)"
               in line for line in lines)
    assert "wrong" not in "".join(line for line in lines if "not_sharing" in line)


async def test_a_bridge_stops_at_once_on_sigterm(server: HttpServer) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    with anyio.fail_after(30), open(server.root / "term.err", "wb") as errlog:
        async with await anyio.open_process(
                [sys.executable, "-m", "pocketmcp"], env=server_env(server.root, SHARE="on"),
                cwd=server.root, stderr=errlog) as bridge:
            assert bridge.stdin is not None and bridge.stdout is not None
            await bridge.stdin.send(json.dumps(init).encode() + b"\n")
            answer = b""
            while b"\n" not in answer:
                answer += await bridge.stdout.receive()
            assert "result" in json.loads(answer)
            bridge.send_signal(signal.SIGTERM)  # stdin stays open
            with anyio.fail_after(5):
                assert await bridge.wait() == 0
    lines = events(server.root / "term.err")
    assert any('"bridge_stopped"' in line and "SIGTERM" in line for line in lines)


def dead_pid() -> int:
    """The pid of a process that has ended."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


async def test_a_stale_discovery_file_is_ignored(tmp_path: Path) -> None:
    index = tmp_path / "data" / "index.db"
    stale = dead_pid()
    discovery.publish(at_file(index), discovery.Published(
        url="http://127.0.0.1:9", pid=stale, index=str(index), token_file=None,
        version="0"))
    with anyio.fail_after(90):
        async with mcp_session(tmp_path, SHARE="on", SERVER_IDLE_EXIT_S="1") as session:
            status = await until(lambda: call(session, "status"),
                                 lambda s: s["role"] != "pending")
        assert status["role"] == "writer"  # a shared server started in its place
        started = discovery.published(at_file(index))
        assert started is not None and started.pid != stale
        assert not any('"http://127.0.0.1:9/mcp"' in line
                       for line in events(tmp_path / "server.err"))

        async def running() -> bool:
            return discovery.alive(started.pid)

        await until(running, lambda up: not up, 30)  # it exits once idle


def test_the_bridge_path_imports_neither_the_runtime_nor_the_model() -> None:
    code = ("import sys, pocketmcp.cli, pocketmcp.mcp.serve, pocketmcp.mcp.bridge\n"
            "heavy = [m for m in ('pocketmcp.runtime', 'pocketmcp.pipeline.supervisor', 'numpy', "
            "'onnxruntime', 'tokenizers', 'pocketmcp.mcp.host') if m in sys.modules]\n"
            "assert not heavy, heavy")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "error"}, timeout=60)
    assert done.returncode == 0, done.stderr
