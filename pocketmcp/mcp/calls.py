"""What every tool call shares: one JSON log line, coded tool errors, sanitised results
(the first and last in mcp/calllog.py, which needs no MCP SDK)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from pocketmcp.core.safe import safe_text
from pocketmcp.errors import PocketError
from pocketmcp.mcp.calllog import error_text, logged_call
from pocketmcp.mcp.calllog import render as render  # the tools' modules take it from here
from pocketmcp.pipeline.prepare import Progress

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)
FETCHES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                          open_world_hint=True)


@asynccontextmanager
async def tool_call(tool: str, **fields: Any) -> AsyncIterator[dict[str, Any]]:
    """One log line per call with its duration and the counts the body adds; a PocketError
    becomes a tool error whose message starts with its code."""
    try:
        async with logged_call(tool, **fields) as counts:
            yield counts
    except PocketError as exc:
        raise ToolError(error_text(exc)) from exc


DB_NAME = ("Name of a database made by create_database: 1-64 letters, digits, '_' or '-'. "
           "Leave it out to use the main index.")
MAX_ID = 2**63 - 1  # SQLite's largest rowid: doc_id and chunk_id are at most this


def logged(value: str | None, limit: int = 80) -> str | None:
    """A client-given name as logged: cut short and made safe."""
    return None if value is None else safe_text(value[:limit])


def progress_of(ctx: Context) -> Progress | None:
    """The request's progress reporter (it sends nothing unless the client gave a progress
    token); None outside a request. A client gone away is no error: the work goes on, and
    what it writes is committed all the same."""
    try:
        ctx.request_context  # noqa: B018 - raises outside a request
    except ValueError:
        return None

    async def report(done: int, total: int | None, message: str) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await ctx.report_progress(done, total, message)

    return report
