"""uvicorn's HTTP/1.1 protocol with a time limit on a request's head: a connection that has
not sent its request line and headers HEADER_TIMEOUT_S after it opened (or after its last
answer) gets a 408 and is closed, so clients that never finish their headers cannot hold
connections forever.

Every connection sends without delay (TCP_NODELAY). asyncio sets it only on sockets whose
protocol number says TCP, and a socket from `socket.create_server` says 0: the last small
write of an answer (an event stream's end) then waited for the client's delayed
acknowledgement, 40 ms on Linux, on every request of a kept-alive connection."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
_BODY = json.dumps({"error": "request_timeout", "error_description": (
    f"the request's headers did not arrive within {HEADER_TIMEOUT_S:g} s; send the whole "
    "request head at once")}).encode()
_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: " + str(len(_BODY)).encode() + b"\r\n\r\n"
        + _BODY)


class SlowHeadersClosed(H11Protocol):
    timeout_s = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head is complete: the request is under way

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next request on this connection has the same limit

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self.conn.our_state is h11.IDLE:
                self.transport.write(_408)
            self.transport.close()
