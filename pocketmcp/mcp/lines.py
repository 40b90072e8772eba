"""The protocol stream's two ends on stdio: the lines the client writes to stdin, and one
writer of stdout. Without the MCP SDK: the server takes both ends before it starts the
runtime, while the SDK is still being imported (mcp/host.py).

The SDK reads stdin in a worker thread that a cancelled task must wait for, so a server told to
stop (SIGTERM) would hang until the client wrote another line. Here a daemon thread reads the
raw descriptor and hands lines to the event loop; fd 0 then points at the null device, so
nothing else in the process (or its children) can read the protocol stream. Likewise fd 1
points at stderr while the server runs, and only `stdout_lines`' writer reaches the client.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pocketmcp.core.safe import safe

# A JSON escape of a UTF-16 surrogate, e.g. "\ud800".
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
# The longest line read: beyond it the line is dropped (not buffered) and answered with a
# parse error. Well above one document's largest text with the default settings
# (1000 chunks of CHUNK_SIZE characters).
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


@asynccontextmanager
async def stdout_lines(fd: int = 1) -> AsyncIterator[MemoryObjectSendStream[str]]:
    """A stream of lines (each one message, without its newline) written to the client in
    order, until the block ends; meanwhile `fd` points at stderr, so stray output misses the
    protocol stream."""
    wire = os.dup(fd)
    os.dup2(2, fd)
    send, receive = anyio.create_memory_object_stream[str](16)

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(wire, view):]

    async def writer() -> None:
        async with receive:
            async for line in receive:
                try:
                    await anyio.to_thread.run_sync(write, (line + "\n").encode("utf-8"),
                                                 abandon_on_cancel=True)
                except OSError:  # the client has gone: what is left is dropped
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, name="pocketmcp.stdout")
            async with send:
                yield send
    finally:
        with suppress(OSError):
            os.dup2(wire, fd)
        os.close(wire)
