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
from pydantic import Field, ValidationError, WithJsonSchema

from pocketmcp.core.safe import safe_text
from pocketmcp.errors import InvalidRequest, PocketError
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


# How a schema's limit reads, by pydantic's error type: the field's own words, with its bound.
_LIMITS = {
    "string_too_long": "at most {max_length} characters",
    "string_too_short": "at least {min_length} characters",
    "too_long": "at most {max_length} items",
    "too_short": "at least {min_length} items",
    "greater_than_equal": "at least {ge}",
    "greater_than": "more than {gt}",
    "less_than_equal": "at most {le}",
    "less_than": "less than {lt}",
    "finite_number": "a finite number (not NaN or infinite)",
    "missing": "required",
    "extra_forbidden": "no such field (misspelt?)",
}


def _bounds(schema: dict[str, Any]) -> str | None:
    """What a field's JSON schema allows, when it is a bounded number or text."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if schema.get("type") in ("number", "integer") and (low is not None or high is not None):
        kind = "a whole number" if schema["type"] == "integer" else "a finite number"
        return (f"{kind} from {low} to {high}" if low is not None and high is not None else
                f"{kind} of at least {low}" if low is not None else f"{kind} of at most {high}")
    if schema.get("type") == "string" and "maxLength" in schema:
        return f"a text of at most {schema['maxLength']} characters"
    return None


def schema_refusal(tool: str, exc: ValidationError, schema: dict[str, Any]) -> str:
    """A tool's arguments refused by its input `schema`, in the project's error shape: the
    code, then each field with the limit it broke (never the value given, nor a link)."""
    said = []
    fields = schema.get("properties", {})
    for err in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        limit = _LIMITS.get(err["type"])
        try:
            text = limit.format(**err.get("ctx", {})) if limit else None
        except (KeyError, IndexError):
            text = None
        top = fields.get(str(err["loc"][0])) if err["loc"] else None
        said.append(f"{field}: {text or (_bounds(top) if top else None) or err['msg']}")
    return error_text(InvalidRequest(f"the arguments of {tool} do not fit its schema: "
                                     + "; ".join(said)))
