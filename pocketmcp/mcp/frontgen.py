"""What the MCP SDK answers, recorded for the stdio front (mcp/front.py), which answers the
first requests before the SDK is imported.

`python -m pocketmcp.mcp.frontgen` writes `front.json` beside this module: for each protocol
version the `initialize` handshake negotiates, the SDK's `initialize` result, its
`tools/list` result (every tool; each distinct list once) and which members of a `tools/call`
result that version keeps. tests/mcp/test_front.py checks that the file matches the SDK
installed, and that the front's answers equal the SDK's. Imports the SDK: the server never
imports this module.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from pocketmcp.config import load
from pocketmcp.mcp.server import build_server
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime
from pocketmcp.settings import TOOL_NAMES

DATA = Path(__file__).with_name("front.json")
CLIENT = {"name": "pocketmcp-frontgen", "version": "1"}


class Collect:
    """The SDK's stdout: the messages it writes, parsed."""

    def __init__(self, send: MemoryObjectSendStream[dict[str, Any]]) -> None:
        self.send = send

    async def write(self, text: str) -> None:
        await self.send.send(json.loads(text))

    async def flush(self) -> None:
        pass


async def exchange(server: MCPServer, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The SDK's replies to `messages` (sent in order over its stdio transport), one per
    request, in the requests' order."""
    lines_in, lines = anyio.create_memory_object_stream[str](len(messages) + 1)
    replies_in, replies = anyio.create_memory_object_stream[dict[str, Any]](len(messages) + 1)
    wanted = [m["id"] for m in messages if "id" in m]
    got: dict[Any, dict[str, Any]] = {}
    lowlevel = server._lowlevel_server  # the transport mcp/stdio.py runs too
    async with (
        lines_in, lines, replies_in, replies,
        stdio_server(stdin=lines, stdout=Collect(replies_in)) as (  # type: ignore[arg-type]
            read, write),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(lowlevel.run, read, write, lowlevel.create_initialization_options())
        for message in messages:
            await lines_in.send(json.dumps(message) + "\n")
        with anyio.fail_after(30):
            while len(got) < len(wanted):
                reply = await replies.receive()
                got[reply.get("id")] = reply
        lines_in.close()  # end of input: the transport and the session end
    return [got[i] for i in wanted]


def initialize(ident: Any, protocol: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "initialize",
            "params": {"protocolVersion": protocol, "capabilities": {}, "clientInfo": CLIENT}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_members(protocol: str) -> list[str]:
    """The members of a `tools/call` result the SDK keeps at `protocol`."""
    sample = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1},
              "isError": False}
    return sorted(methods.serialize_server_result("tools/call", protocol, sample))


async def record() -> dict[str, Any]:
    config = load({"tools": ",".join(TOOL_NAMES)}, environ={})
    server = build_server(Runtime(config, serving(False)), instructions="-")
    out: dict[str, Any] = {"sdk": version("mcp"), "latest": LATEST_HANDSHAKE_VERSION,
                           "versions": {}, "tools": []}
    for protocol in HANDSHAKE_PROTOCOL_VERSIONS:
        init, tools = await exchange(server, [
            initialize(1, protocol), INITIALIZED,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
        listed = tools["result"]["tools"]
        if listed not in out["tools"]:  # the same at most versions: kept once
            out["tools"].append(listed)
        out["versions"][protocol] = {"initialize": init["result"],
                                     "tools": out["tools"].index(listed),
                                     "call": call_members(protocol)}
    return out


def main() -> None:
    DATA.write_text(json.dumps(anyio.run(record), indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    print(f"wrote {DATA}", file=sys.stderr)  # noqa: T201


if __name__ == "__main__":
    main()
