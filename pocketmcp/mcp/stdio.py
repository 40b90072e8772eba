"""The MCP SDK's session on stdio, fed the lines of the protocol stream (mcp/lines.py) and
writing its messages to the client's stdout writer.

Every line is screened before the SDK sees it: a line that is not a valid JSON-RPC message
(invalid JSON, nested deeper than the parser's bound, too long, a batch array, a wrong
`jsonrpc` version, an id that is neither a number nor a string) gets the JSON-RPC error it
deserves (-32700 parse error or -32600 invalid request, with id null when none can be read).
The SDK would drop such a line without a word and leave its client waiting forever.
"""

from __future__ import annotations

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
from pocketmcp.mcp.lines import OVERSIZE

log = logs.get("pocketmcp.stdio")

# Lines longer than this are screened in a worker thread (parsing them takes a while).
SCREEN_IN_THREAD = 65536


def screen(line: str) -> mcp_types.JSONRPCError | None:
    """None for a line the SDK takes as a message; otherwise the error reply it deserves."""
    if line.rstrip("\n") == OVERSIZE:  # as the reader hands it on, with its newline
        return jsonrpc.too_large(wire.MAX_LINE_BYTES)
    return jsonrpc.screen(line)


class _Wire:
    """The SDK's stdout: each message it writes goes to the client's writer."""

    def __init__(self, out: ObjectSendStream[str]) -> None:
        self.out = out

    async def write(self, text: str) -> None:
        await self.out.send(text.rstrip("\n"))

    async def flush(self) -> None:
        pass


async def serve(server: Any, lines: ObjectReceiveStream[str], out: ObjectSendStream[str],
                *, serving: anyio.Event | None = None) -> None:
    """Run an MCPServer on `lines` until they end (the client closed stdin) or until
    cancelled; its messages go to `out`. `serving` is set once the session takes lines."""
    lowlevel = server._lowlevel_server  # run on the streams given here
    checked, valid = anyio.create_memory_object_stream[str](16)
    async with (
        stdio_server(stdin=valid, stdout=_Wire(out)) as (read, write),  # type: ignore[arg-type]
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_screen_lines, lines, checked, write, name="pocketmcp.stdio.screen")
        if serving is not None:
            serving.set()
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


async def _screen_lines(lines: ObjectReceiveStream[str], valid: MemoryObjectSendStream[str],
                        replies: Any) -> None:
    """Hand valid lines on to the SDK, answer the others at once."""
    async with lines, valid:
        async for line in lines:
            if not line.strip():
                continue  # a blank line is no message
            error = await anyio.to_thread.run_sync(screen, line) \
                if len(line) > SCREEN_IN_THREAD else screen(line)
            if error is None:
                await valid.send(line)
                continue
            log.warning("bad_message", code=error.error.code, reason=error.error.message,
                        id=error.id, bytes=len(line))
            try:
                await replies.send(SessionMessage(error))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
