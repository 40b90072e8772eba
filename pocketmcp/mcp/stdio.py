"""Serving MCP over stdin/stdout so that cancellation takes effect at once.

The SDK reads stdin in a worker thread that a cancelled task must wait for, so a server told to
stop (SIGTERM) would hang until the client wrote another line. Here a daemon thread reads the
raw descriptor and hands lines to the event loop; fd 0 then points at the null device, so
nothing else in the process (or its children) can read the protocol stream.
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
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.stdio import stdio_server

from pocketmcp.core.safe import safe

# A JSON escape of a UTF-16 surrogate, e.g. "\ud800".
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def repair(line: str) -> str:
    """Replace lone surrogates escaped in a JSON line by U+FFFD.

    The SDK's JSON parser rejects them and drops the whole message without an answer, so a
    client that sent one would wait forever. Paired surrogates (valid characters) survive.
    """
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    return json.dumps(safe(message), ensure_ascii=False)


def stdin_lines(fd: int = 0) -> MemoryObjectReceiveStream[str]:
    """Lines of the protocol stream, ending when the client closes it. Call in the loop."""
    send, receive = anyio.create_memory_object_stream[str](16)
    token = anyio.lowlevel.current_token()
    wire = os.dup(fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, fd)
    os.close(devnull)

    def read() -> None:
        pending = b""
        try:
            while chunk := os.read(wire, 65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text = repair(line.decode("utf-8", "replace")) + "\n"
                    anyio.from_thread.run(send.send, text, token=token)
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
    async with stdio_server(stdin=stdin_lines()) as (read, write):  # type: ignore[arg-type]
        await lowlevel.run(read, write, lowlevel.create_initialization_options())
