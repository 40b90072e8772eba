"""Helpers to drive the real server as a subprocess over stdio with the python-sdk client."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from pocketmcp.mcp import discovery
from pocketmcp.store.api import Place
from pocketmcp.store.places import at_file
from support.cli import command_for
from support.processes import embedding_env

T = TypeVar("T")


def index_of(tmp_path: Path) -> Place:
    """The index of the servers `server_env` sets up under `tmp_path`."""
    return at_file(tmp_path / "data" / "index.db")


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a server on the index and folder under `tmp_path`, embedding as the
    test asked (support/processes.py), with `extra` on top."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "SQLITE_PATH": str(tmp_path / "data" / "index.db"),
        "WATCH_DIR": str(tmp_path / "kb"),
        "DEBOUNCE_MS": "50",
        "LOG_LEVEL": "info",
        "SHARE": "off",  # each stdio server on its own, unless a test shares (test_sharing.py)
    }
    for key in ("XDG_CACHE_HOME", "PYTHONPATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(embedding_env())
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_session(tmp_path: Path, *args: str, stderr_name: str = "server.err",
                      **env: str) -> AsyncIterator[ClientSession]:
    full_env = server_env(tmp_path, **env)
    command = command_for(full_env)
    params = StdioServerParameters(command=command[0], args=[*command[1:], *args],
                                   env=full_env, cwd=str(tmp_path))
    with open(tmp_path / stderr_name, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
            read, write
        ) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, args: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await session.call_tool(tool, args or {})
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    return result.structured_content


async def tool_error(session: ClientSession, tool: str, args: dict[str, Any]) -> str:
    """A tool call that must fail with a tool error; its message."""
    result = await session.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


def code_of(error: str) -> str | None:
    """The code a tool error's message starts with ("NOT_FOUND: ..."), after the SDK's
    "Error executing tool NAME: " preamble."""
    found = re.match(r"(?:Error executing tool \S+: )?([A-Z][A-Z_]+): ", error)
    return found.group(1) if found else None


# A stop (EOF, SIGTERM) aims at 5 s whatever is in flight; scripts/reliability.py measures
# it. Tests allow twice that, for machines busy with other work: a stop that waits for work
# in flight (minutes for the files these tests use) still fails.
STOP_BOUND_S = 10.0


async def until(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool],
                seconds: float = 30) -> T:
    """Poll `probe` with a deadline until `ok` holds; its last value. Past the deadline, a
    TimeoutError that says the last value seen. It looks again soon at first, then every
    50 ms: what comes at once is seen at once, a long wait costs few probes."""
    seen: list[T] = []
    pause = 0.005
    try:
        with anyio.fail_after(seconds):
            while True:
                value = await probe()
                if ok(value):
                    return value
                seen[:] = [value]
                await anyio.sleep(pause)
                pause = min(0.05, pause * 2)
    except TimeoutError:
        last = repr(seen[0])[-2000:] if seen else "nothing (the probe never answered)"
        raise TimeoutError(f"not within {seconds} s; last seen: {last}") from None


async def paths_for(session: ClientSession, query: str, top_k: int = 5) -> list[str]:
    result = await call(session, "search", {"query": query, "top_k": top_k})
    paths: list[str] = []
    for match in result["matches"]:
        if match["path"] and match["path"] not in paths:
            paths.append(match["path"])
    return paths


class HttpServer:
    """A real `pocketmcp serve --transport http` process on 127.0.0.1 and a free port."""

    def __init__(self, process: subprocess.Popen[bytes], root: Path, url: str, token: str
                 ) -> None:
        self.process = process
        self.root = root
        self.url = url
        self.token = token

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stderr(self) -> str:
        return (self.root / "http.err").read_text()

    @asynccontextmanager
    async def session(self, transport: str = "http", **kw: Any) -> AsyncIterator[ClientSession]:
        """An initialized SDK client session over Streamable HTTP ("http") or SSE ("sse")."""
        if transport == "sse":
            async with sse_client(self.url + "/sse", headers=self.auth) as (read, write), \
                    ClientSession(read, write, **kw) as session:
                await session.initialize()
                yield session
            return
        async with httpx2.AsyncClient(headers=self.auth, trust_env=False,
                                      timeout=httpx2.Timeout(30, read=300)) as http, \
                streamable_http_client(self.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write, **kw) as session:
            await session.initialize()
            yield session


def start_http(root: Path, *args: str, ready: bool = True, **env: str) -> HttpServer:
    """Start the server (its index and folder under `root`); wait until its discovery file
    names it and, with `ready`, until it is ready. Stop it with `stop_http`."""
    (root / "kb").mkdir(exist_ok=True)
    index = root / "data" / "index.db"
    with open(root / "http.err", "wb") as errlog:
        process = subprocess.Popen(
            [sys.executable, "-m", "pocketmcp", "serve", "--transport", "http", "--port", "0",
             *args], env=server_env(root, **env), cwd=root, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=errlog)
    deadline = time.monotonic() + 60
    found = None
    while found is None or found.pid != process.pid:
        assert process.poll() is None, (root / "http.err").read_text()[-3000:]
        assert time.monotonic() < deadline, "the server did not publish its URL"
        time.sleep(0.05)
        found = discovery.find(at_file(index))
    token = (env.get("POCKETMCP_TOKEN")
             or discovery.token_file(at_file(index)).read_text().strip())
    server = HttpServer(process, root, found.url, token)
    while ready and httpx2.get(found.url + "/health/ready", trust_env=False).status_code != 200:
        assert time.monotonic() < deadline, "the server did not become ready"
        time.sleep(0.05)
    return server


def stop_http(server: HttpServer) -> int:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    return server.process.returncode
