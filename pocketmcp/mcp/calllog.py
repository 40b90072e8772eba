"""What a tool call does besides its op, without the MCP SDK: one JSON log line per call,
and sanitised results (the SDK's stdio transport fails on a lone surrogate, and a control
character would reach the client's model). mcp/calls.py turns the errors into the SDK's
tool errors."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from pydantic import BaseModel

from pocketmcp import logs
from pocketmcp.core.safe import safe, safe_text
from pocketmcp.errors import PocketError, single

log = logs.get("pocketmcp.tools")
M = TypeVar("M", bound=BaseModel)


@asynccontextmanager
async def logged_call(tool: str, **fields: Any) -> AsyncIterator[dict[str, Any]]:
    """One log line per call with its duration and the counts the body adds; an error from
    inside an op's task group comes out as itself."""
    started = time.perf_counter()
    counts: dict[str, Any] = {}
    outcome = "ok"
    try:
        try:
            yield counts
        except BaseExceptionGroup as group:  # one error from inside an op's task group
            raise single(group) from None
    except PocketError as exc:
        outcome = "error"
        counts["error"] = str(exc)
        raise
    except BaseException as exc:
        outcome = "error"
        counts["error"] = repr(exc)
        raise
    finally:
        log.info("tool_call", tool=tool, outcome=outcome,
                 duration_ms=round((time.perf_counter() - started) * 1000, 1),
                 **fields, **counts)


def error_text(exc: PocketError) -> str:
    """A tool error's message: the error's code, then what it says."""
    return safe_text(f"{exc.code}: {exc}")


def render(result: M) -> M:
    """`result` with every string cleaned of lone surrogates and control characters, so no
    file name or document can break the client's JSON-RPC stream."""
    return type(result).model_validate(safe(result.model_dump()))
