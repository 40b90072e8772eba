"""Serving MCP over stdin/stdout so that cancellation takes effect at once.

The SDK reads stdin in a worker thread that a cancelled task must wait for, so a server told to
stop (SIGTERM) would hang until the client wrote another line. Here a daemon thread reads the
raw descriptor and hands lines to the event loop; fd 0 then points at the null device, so
nothing else in the process (or its children) can read the protocol stream.

Every line is screened before the SDK sees it: a line that is not a valid JSON-RPC message
(invalid JSON, nested deeper than the parser's bound, too long, a batch array, a wrong
`jsonrpc` version, an id that is neither a number nor a string) gets the JSON-RPC error it
deserves (-32700 parse error or -32600 invalid request, with id null when none can be read).
The SDK would drop such a line without a word and leave its client waiting forever.
"""

from __future__ import annotations

import json
import os
import re
import threading
from contextlib import suppress
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from pocketmcp import logs
from pocketmcp.core.safe import safe
from pocketmcp.mcp import jsonrpc

log = logs.get("pocketmcp.stdio")

# A JSON escape of a UTF-16 surrogate, e.g. "\ud800".
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
# The longest line read: beyond it the line is dropped (not buffered) and answered with a
# parse error. Well above one document's largest text with the default settings
# (MAX_CHUNKS_PER_DOC x CHUNK_SIZE characters).
MAX_LINE_BYTES = 64 * 1024 * 1024
# What the reader hands on in place of a line over MAX_LINE_BYTES (never valid JSON).
OVERSIZE = "\x00oversize\x00"


def repair(line: str) -> str:
    """Replace lone surrogates escaped in a JSON line by U+FFFD.

    The SDK's JSON parser rejects them and drops the whole message without an answer, so a
    client that sent one would wait forever. Paired surrogates (valid characters) survive.
    """
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)
        repaired = safe(message)
    except (ValueError, RecursionError):  # not JSON, or nested too deep: screen() answers it
        return line
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        # The id goes back to the client as it came, but for lone surrogates (which no
        # UTF-8 line can carry): a client matches replies to its requests by it.
        repaired["id"] = _SURROGATE.sub("\ufffd", message["id"])
    return json.dumps(repaired, ensure_ascii=False)


def screen(line: str) -> mcp_types.JSONRPCError | None:
    """None for a line the SDK takes as a message; otherwise the error reply it deserves."""
    if line == OVERSIZE:
        return jsonrpc.too_large(MAX_LINE_BYTES)
    return jsonrpc.screen(line)


def stdin_lines(fd: int = 0) -> MemoryObjectReceiveStream[str]:
    """Lines of the protocol stream, ending when the client closes it. Call in the loop.
    A line over MAX_LINE_BYTES is dropped as it arrives and stands as OVERSIZE."""
    send, receive = anyio.create_memory_object_stream[str](16)
    token = anyio.lowlevel.current_token()
    wire = os.dup(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, fd)
    os.close(devnull)

    def read() -> None:
        pending: list[bytes] = []
        size = 0
        dropping = False  # within a line over the limit, until its end
        try:
            while chunk := os.read(wire, 65536):
                *ends, rest = chunk.split(b"\n")
                for end in ends:
                    if dropping or size + len(end) > MAX_LINE_BYTES:
                        text = OVERSIZE
                    else:
                        text = repair(b"".join([*pending, end]).decode("utf-8", "replace"))
                    pending, size, dropping = [], 0, False
                    anyio.from_thread.run(send.send, text + "\n", token=token)
                if not dropping and size + len(rest) > MAX_LINE_BYTES:
                    pending, size, dropping = [], 0, True
                elif not dropping and rest:
                    pending.append(rest)
                    size += len(rest)
        except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the descriptor or the event loop is gone: end of input either way
        finally:
            with suppress(RuntimeError):
                anyio.from_thread.run_sync(send.close, token=token)
            os.close(wire)

    threading.Thread(target=read, name="pocketmcp.stdin", daemon=True).start()
    return receive


async def serve_stdio(server: Any) -> None:
    """Run an MCPServer on stdio until the client closes stdin, or until cancelled."""
    lowlevel = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:  # an SDK without the attribute: its own transport, less cancellable
        await server.run_stdio_async()
        return
    lines = stdin_lines()
    checked, valid = anyio.create_memory_object_stream[str](16)
    async with (
        stdio_server(stdin=valid) as (read, write),  # type: ignore[arg-type]
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_screen_lines, lines, checked, write, name="pocketmcp.stdio.screen")
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


async def _screen_lines(lines: MemoryObjectReceiveStream[str],
                        valid: MemoryObjectSendStream[str], replies: Any) -> None:
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
