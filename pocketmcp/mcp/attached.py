"""What is open on the HTTP server, for a server an editor started (mcp/sharing.py) to stop
once idle: `Attached` counts the requests and streams open on it (a bridge keeps one stream
open for as long as it is attached), and `exit_when_idle` stops the server once none has been
open for SERVER_IDLE_EXIT_S."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

from pocketmcp import logs
from pocketmcp.mcp.http import OPEN_PATHS, SCREENED_PATHS

log = logs.get("pocketmcp.sharing")

FIRST_CLIENT_S = 30.0  # a new server waits this long for its first client at least
IDLE_POLL_S = 1.0  # how often a server started by an editor looks whether it is idle
# A client's MCP session: the paths of its messages (SCREENED_PATHS) and of its streams.
MCP_PATHS = SCREENED_PATHS | {"/sse"}


class Attached:
    """ASGI middleware counting what is open on the server: `requests` in flight (the long
    streams a bridge keeps open included), `streams` of them long-lived (GET /mcp and
    /sse: one per attached client), and when the count last changed."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app
        self.requests = 0
        self.streams = 0
        self.changed = time.monotonic()
        self.came = False  # whether a client has come yet

    async def __call__(self, scope: dict[str, object], receive: Callable[..., object],
                       send: Callable[..., object]) -> None:
        if scope.get("type") != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        stream = scope.get("method") == "GET" and scope.get("path") in MCP_PATHS
        self.requests += 1
        self.streams += stream
        # A client's MCP session (not a probe of /tools) ends the wait for the first one.
        self.came = self.came or scope.get("path") in MCP_PATHS
        self.changed = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.requests -= 1
            self.streams -= stream
            self.changed = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request or stream closed; 0 while one is open, and for
        FIRST_CLIENT_S after start while no client has come yet (the editor that started
        the server is on its way)."""
        if self.requests:
            return 0.0
        now = time.monotonic()
        if not self.came and now - self.changed < FIRST_CLIENT_S:
            return 0.0
        return now - self.changed


async def exit_when_idle(attached: Attached, idle_s: float, stop: Callable[[], None]) -> None:
    """Call `stop` once nothing has been open on the server for `idle_s` seconds."""
    while True:
        await anyio.sleep(min(IDLE_POLL_S, max(idle_s / 4, 0.05)))
        idle = attached.idle_for()
        if idle >= idle_s:
            log.info("idle_exit", idle_s=round(idle, 1))
            stop()
            return
