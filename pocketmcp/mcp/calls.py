"""What every tool call shares: one JSON log line, coded tool errors, sanitised results
(the first and last in mcp/calllog.py, which needs no MCP SDK)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, WithJsonSchema

from pocketmcp.core.safe import safe_text
from pocketmcp.errors import PocketError
from pocketmcp.mcp.calllog import error_text, logged_call
from pocketmcp.mcp.calllog import render as render  # the tools' modules take it from here
from pocketmcp.pipeline.prepare import Progress

# Each says only what differs from the protocol's defaults (readOnlyHint false,
# destructiveHint true, idempotentHint false, openWorldHint true), and only the hints clients
# act on (whether a tool changes or destroys anything): every tool's annotations are sent to
# the client's model with its definition. A tool that deletes is all defaults.
READ_ONLY = ToolAnnotations(read_only_hint=True)
WRITES = ToolAnnotations(destructive_hint=False)
DELETES: ToolAnnotations | None = None
FETCHES = ToolAnnotations(destructive_hint=False)


@asynccontextmanager
async def tool_call(tool: str, **fields: Any) -> AsyncIterator[dict[str, Any]]:
    """One log line per call with its duration and the counts the body adds; a PocketError
    becomes a tool error whose message starts with its code."""
    try:
        async with logged_call(tool, **fields) as counts:
            yield counts
    except PocketError as exc:
        raise ToolError(error_text(exc)) from exc


DB_NAME = "From create_database; default: the main index."
MAX_ID = 2**63 - 1  # SQLite's largest rowid: doc_id and chunk_id are at most this
# A doc_id argument, published without its upper bound (more digits than a JavaScript
# client holds exactly; the SDK still checks it).
DocId = Annotated[int, Field(ge=1, le=MAX_ID), WithJsonSchema({"type": "integer", "minimum": 1})]


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
