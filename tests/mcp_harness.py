"""Helpers to drive the real server as a subprocess over stdio with the python-sdk client."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

T = TypeVar("T")


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "SQLITE_PATH": str(tmp_path / "data" / "index.db"),
        "WATCH_DIR": str(tmp_path / "kb"),
        "DEBOUNCE_MS": "50",
        "LOG_LEVEL": "info",
    }
    for key in ("POCKETMCP_CACHE", "XDG_CACHE_HOME", "PYTHONPATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_session(tmp_path: Path, *args: str, stderr_name: str = "server.err",
                      **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "pocketmcp", *args],
                                   env=server_env(tmp_path, **env), cwd=str(tmp_path))
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


async def until(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool],
                seconds: float = 30) -> T:
    """Poll `probe` with a deadline until `ok` holds; its last value."""
    with anyio.fail_after(seconds):
        while True:
            value = await probe()
            if ok(value):
                return value
            await anyio.sleep(0.05)


async def paths_for(session: ClientSession, query: str, top_k: int = 5) -> list[str]:
    result = await call(session, "search", {"query": query, "top_k": top_k})
    paths: list[str] = []
    for match in result["matches"]:
        if match["path"] and match["path"] not in paths:
            paths.append(match["path"])
    return paths
