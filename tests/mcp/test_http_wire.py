"""The HTTP server's connections on the wire, in process: uvicorn as the server runs it
(mcp/http.py's listener) on a socket made as the server makes its own (mcp/host.py)."""

from __future__ import annotations

import socket

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pocketmcp.mcp import http
from pocketmcp.mcp.host import _listen


async def test_every_connection_sends_without_waiting_for_acknowledgements() -> None:
    # Without TCP_NODELAY, the last small write of an answer (an event stream's end) waits
    # for the client's delayed acknowledgement: 40 ms on every request of a kept-alive
    # connection. asyncio sets it only for sockets whose protocol number says TCP.
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    listener = http.listener(Starlette(routes=[Route("/", hello)]), grace_s=1)
    sock = _listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    delays: list[int] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, [sock])  # the socket listens already
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = b""
                while b"hello" not in answer:
                    answer += await client.receive()
                for protocol in listener.server_state.connections:
                    raw = protocol.transport.get_extra_info("socket")  # type: ignore[attr-defined]
                    delays.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            listener.handle_exit(2, None)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 200")
    assert delays and all(delays), delays
