"""What every transport checks before the SDK sees a message: is it one valid JSON-RPC
message? If not, the error reply it deserves.

A message that is not valid JSON-RPC (invalid JSON, nested deeper than the parser's bound, a
batch array, a wrong `jsonrpc` version, an id that is neither a number nor a string) gets
-32700 (parse error) or -32600 (invalid request), with id null when none can be read. The
SDK would drop it without a word on stdio, take a request with an object id for a
notification, and answer the rest over HTTP with -32602 (invalid params).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types
from pydantic import ValidationError


def error(ident: Any, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=ident,
                                  error=mcp_types.ErrorData(code=code, message=message))


def too_large(limit: int) -> mcp_types.JSONRPCError:
    return error(None, mcp_types.PARSE_ERROR,
                 f"Parse error: a message may be at most {limit} bytes long")


def request_id(value: Any) -> int | str | None:
    """`value` if it is a valid JSON-RPC id, else None."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def screen(text: str | bytes) -> mcp_types.JSONRPCError | None:
    """None for a message the SDK takes as one; otherwise the error reply it deserves
    (blocking for long texts: run those in a worker thread)."""
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        problems = exc.errors(include_url=False)
        if any(p["type"] == "json_invalid" for p in problems):  # includes nesting too deep
            return error(None, mcp_types.PARSE_ERROR, f"Parse error: {problems[0]['msg'][:200]}")
        return _invalid(text)
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None  # the SDK's own parser took it; let it
    if (isinstance(message, dict) and "method" in message and "id" in message
            and request_id(message["id"]) is None):
        # The SDK would take it for a notification and never answer it.
        return error(None, mcp_types.INVALID_REQUEST,
                     "Invalid Request: id must be a string or an integer")
    return None


def _invalid(text: str | bytes) -> mcp_types.JSONRPCError:
    """The reply to valid JSON that is not a JSON-RPC message."""
    try:
        message = json.loads(text)  # depth already bounded by the SDK's parser
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, list):
        return error(None, mcp_types.INVALID_REQUEST,
                     "Invalid Request: batches are not supported; send one message at a time")
    if not isinstance(message, dict):
        return error(None, mcp_types.INVALID_REQUEST,
                     "Invalid Request: a message must be a JSON object")
    ident = request_id(message.get("id"))
    if message.get("jsonrpc") != "2.0":
        return error(ident, mcp_types.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"')
    if "method" in message and not isinstance(message["method"], str):
        return error(ident, mcp_types.INVALID_REQUEST, "Invalid Request: method must be a string")
    return error(ident, mcp_types.INVALID_REQUEST,
                 "Invalid Request: not a JSON-RPC request, notification or response")
