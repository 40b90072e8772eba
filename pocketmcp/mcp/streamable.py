"""The client's side of MCP Streamable HTTP that the bridge (mcp/bridge.py) speaks without the
SDK: the headers a client sends, as the SDK's client names and encodes them, and the events of
an SSE answer."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator

import httpx2

# The headers (the MCP SDK's names): the session, the negotiated protocol version, and, in the
# per-request protocol era (the version in a request's `_meta`), the method and the name it
# bears.
SESSION = "mcp-session-id"
VERSION = "mcp-protocol-version"
METHOD = "mcp-method"
NAME = "mcp-name"
VERSION_META = "io.modelcontextprotocol/protocolVersion"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_B64_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")


def header_value(value: str) -> str:
    """`value` as an HTTP header carries it (the SDK's base64 sentinel when it must)."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not (
            _B64_SENTINEL.fullmatch(value)):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


async def events(response: httpx2.Response) -> AsyncIterator[str]:
    """The data of each event of an SSE response."""
    data: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" ") if line.startswith("data: ") else line[5:])
    if data:
        yield "\n".join(data)
