"""The MCP SDK's session on stdio, fed the lines of the protocol stream (mcp/lines.py) and
writing its replies to the client's stdout writer.

On stdio the front (mcp/front.py) answers the first requests; the SDK takes the session over
once it is imported (`serve_sdk`): it is fed the client's `initialize` again (under an id of
its own, so that the reply can be dropped), then every line the front left to it, in order.

Every line is screened before the SDK sees it: a line that is not a valid JSON-RPC message
(invalid JSON, nested deeper than the parser's bound, too long, a batch array, a wrong
`jsonrpc` version, an id that is neither a number nor a string) gets the JSON-RPC error it
deserves (-32700 parse error or -32600 invalid request, with id null when none can be read).
The SDK would drop such a line without a word and leave its client waiting forever.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from pocketmcp import logs
from pocketmcp.mcp import jsonrpc
from pocketmcp.mcp import lines as wire
from pocketmcp.mcp.lines import MAX_LINE_BYTES, OVERSIZE, repair, stdin_lines

__all__ = ["MAX_LINE_BYTES", "OVERSIZE", "repair", "screen", "serve_sdk", "stdin_lines"]

log = logs.get("pocketmcp.stdio")


def screen(line: str) -> mcp_types.JSONRPCError | None:
    """None for a line the SDK takes as a message; otherwise the error reply it deserves."""
    if line == OVERSIZE:
        return jsonrpc.too_large(wire.MAX_LINE_BYTES)
    return jsonrpc.screen(line)


class _Replies:
    """The SDK's stdout: each message it writes goes to the client's writer, but the reply
    to the request with id `drop` (the replayed `initialize`), which is dropped."""

    def __init__(self, out: ObjectSendStream[str], drop: str | None) -> None:
        self.out = out
        self.drop = drop

    async def write(self, text: str) -> None:
        text = text.rstrip("\n")
        if self.drop is not None and self.drop in text:
            message = json.loads(text)
            if isinstance(message, dict) and message.get("id") == self.drop:
                self.drop = None
                return
        await self.out.send(text)

    async def flush(self) -> None:
        pass


async def serve_sdk(server: Any, lines: ObjectReceiveStream[str], out: ObjectSendStream[str],
                    drop: str | None = None) -> None:
    """Run an MCPServer on `lines` (ending when the client closes stdin) until they end or
    until cancelled; its messages go to `out`, but the reply to request `drop`."""
    lowlevel = server._lowlevel_server  # run on the streams given here
    checked, valid = anyio.create_memory_object_stream[str](16)
    async with (
        stdio_server(stdin=valid, stdout=_Replies(out, drop)) as (  # type: ignore[arg-type]
            read, write),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_screen_lines, lines, checked, write, name="pocketmcp.stdio.screen")
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


async def _screen_lines(lines: ObjectReceiveStream[str], valid: MemoryObjectSendStream[str],
                        replies: Any) -> None:
    """Hand valid lines on to the SDK, answer the others at once."""
    async with lines, valid:
        async for line in lines:
            if not line.strip():
                continue  # a blank line is no message
            error = await anyio.to_thread.run_sync(screen, line) if len(line) > 65536 \
                else screen(line)
            if error is None:
                await valid.send(line)
                continue
            log.warning("bad_message", code=error.error.code, reason=error.error.message,
                        id=error.id, bytes=len(line))
            try:
                await replies.send(SessionMessage(error))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

