"""A stdio server that only relays: every JSON-RPC message from the client that started it
goes to the HTTP server of the same index over MCP Streamable HTTP, and every message back,
unchanged, through the SDK's own transports. It loads no model and opens no index.

It ends when the client closes stdin, or on SIGTERM or SIGINT (the HTTP session is closed).
When the HTTP server goes away, the requests still in flight are answered with an error at
once. With a way to reconnect (a shared server, mcp/sharing.py), the bridge then waits for the
client's next request, has a server again (started anew when none runs), repeats the client's
`initialize` to it and relays the request: the client sees one session throughout. A request
that finds no server is answered with an error saying why; nothing hangs. Without one (SHARE
off), the bridge ends, and the client sees the server exit.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    PROTOCOL_VERSION_META_KEY,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from pocketmcp import logs
from pocketmcp.core.secret import Secret
from pocketmcp.errors import PocketError
from pocketmcp.mcp.discovery import Published, alive
from pocketmcp.mcp.lines import stdin_lines

log = logs.get("pocketmcp.bridge")

# The SDK client's timeouts: 30 s to connect and write, 5 minutes between events of a stream.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# How often the bridge checks that the server's process still runs.
WATCH_S = 0.5
# How long the repeated `initialize` may take on a server reached again.
REPLAY_S = 30.0
SERVER_GONE = -32000  # the JSON-RPC error of a request the server's end left unanswered

Upstream = tuple[Published, Secret]
Reconnect = Callable[[], Awaitable[Upstream]]


class Stamper:
    """The per-message HTTP headers the SDK's ClientSession would send for each message.

    Relayed messages carry none, so without this the server would not learn the negotiated
    protocol version from the headers, and requests of the per-request protocol era (their
    version in `_meta`) would lack their Mcp-Method and Mcp-Name headers.
    """

    def __init__(self) -> None:
        self._initialize_id: Any = None
        self.version: str | None = None

    def outbound(self, message: Any) -> dict[str, str] | None:
        if isinstance(message, JSONRPCRequest):
            if message.method == "initialize":
                self._initialize_id = message.id
                return None
            params = message.params or {}
            meta = params.get("_meta") or {}
            version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
            if isinstance(version, str):
                headers = {MCP_PROTOCOL_VERSION_HEADER: version,
                           MCP_METHOD_HEADER: message.method}
                key = NAME_BEARING_METHODS.get(message.method)
                if key is not None and isinstance(params.get(key), str):
                    headers[MCP_NAME_HEADER] = encode_header_value(params[key])
                return headers
        return {MCP_PROTOCOL_VERSION_HEADER: self.version} if self.version else None

    def inbound(self, message: Any) -> None:
        if (isinstance(message, JSONRPCResponse) and self._initialize_id is not None
                and message.id == self._initialize_id and isinstance(message.result, dict)):
            version = message.result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None


class Relay:
    """What a bridge keeps across servers: the client's `initialize` (repeated to a new
    server), whether it was confirmed, and the requests in flight to the current server."""

    def __init__(self) -> None:
        self.stamper = Stamper()
        self.init: JSONRPCRequest | None = None
        self.initialized = False
        self.pending: set[Any] = set()
        self.replays = 0

    def outbound(self, message: Any) -> SessionMessage:
        if isinstance(message, JSONRPCRequest):
            self.pending.add(message.id)
            if message.method == "initialize":
                self.init = message
        elif isinstance(message, JSONRPCNotification) and (
                message.method == "notifications/initialized"):
            self.initialized = True
        stamped = self.stamper.outbound(message)
        metadata = ClientMessageMetadata(headers=stamped) if stamped else None
        return SessionMessage(message, metadata=metadata)

    def inbound(self, message: Any) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self.pending.discard(message.id)
        self.stamper.inbound(message)

    async def fail_pending(self, to_client: Any, why: str) -> None:
        """Answer every request still in flight: its server has gone."""
        for request_id in sorted(self.pending, key=str):
            await to_client.send(SessionMessage(error_reply(request_id, why)))
        self.pending.clear()


def error_reply(request_id: Any, why: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id,
                        error=ErrorData(code=SERVER_GONE, message=f"pocketmcp: {why}"))


async def bridge(upstream: Published, token: Secret, *, reconnect: Reconnect | None = None
                 ) -> int:
    """Relay stdin/stdout to `upstream` (and, with `reconnect`, to the servers after it)
    until stdin closes or a signal comes; 1 when the server went away first and there was
    no way to reconnect."""
    relay = Relay()
    ended = "stdin closed"
    # The stdio side outlives the HTTP sessions (closed first, so the server hears of it), and
    # its reader waits for stdin to close: unless that is why the relay ended, it is cancelled.
    with anyio.CancelScope() as stdio_scope:
        async with stdio_server(stdin=stdin_lines()) as (from_client, to_client):  # type: ignore[arg-type]
            async with anyio.create_task_group() as life:

                async def on_signal() -> None:
                    nonlocal ended
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for signum in signals:
                            ended = signal.Signals(signum).name
                            life.cancel_scope.cancel()

                life.start_soon(on_signal, name="pocketmcp.signals")
                current: Upstream | None = (upstream, token)
                first: SessionMessage | None = None
                while current is not None:
                    how = await _relay(relay, *current, from_client, to_client, first)
                    if how == "stdin closed":
                        break
                    await relay.fail_pending(to_client, (
                        f"the shared server (pid {current[0].pid}) went away while this "
                        "request was in flight; it may not have been carried out: send it "
                        "again"))
                    if reconnect is None:
                        ended = "server gone"
                        break
                    first, current = await _next_server(relay, from_client, to_client,
                                                        reconnect)
                life.cancel_scope.cancel()
            await to_client.aclose()  # the stdout writer ends once it has written the rest
            if ended != "stdin closed":
                stdio_scope.cancel()
    log.info("bridge_stopped", reason=ended)
    return 1 if ended == "server gone" else 0


async def _next_server(relay: Relay, from_client: Any, to_client: Any, reconnect: Reconnect
                       ) -> tuple[SessionMessage | None, Upstream | None]:
    """Wait for the client's next request, then a server for it (started anew when none
    runs); a request that finds none is answered with an error saying why. (None, None)
    once stdin has closed."""
    log.warning("server_gone", action="a server is looked for at the next request")
    async for item in from_client:
        if isinstance(item, Exception):
            log.warning("bad_message_from_client", error=str(item)[:200])
            continue
        if not isinstance(item.message, JSONRPCRequest):
            if isinstance(item.message, JSONRPCNotification) and (
                    item.message.method == "notifications/initialized"):
                relay.initialized = True
            continue  # notifications for a server that is gone: dropped
        try:
            found = await reconnect()
        except (PocketError, OSError) as exc:
            log.warning("no_server", error=str(exc))
            await to_client.send(SessionMessage(error_reply(item.message.id, (
                f"the shared server of this index has gone and none could be started: {exc}"
            ))))
            continue
        log.info("server_found", url=found[0].url, pid=found[0].pid)
        return item, found
    return None, None


async def _relay(relay: Relay, upstream: Published, token: Secret, from_client: Any,
                 to_client: Any, first: SessionMessage | None) -> str:
    """Relay to one server until stdin closes ("stdin closed") or the server goes ("server
    gone"). `first`: a client message to send once the client's `initialize` is repeated."""
    url = upstream.mcp_url
    log.info("bridging", url=url, pid=upstream.pid)
    how = "server gone"
    headers = {"Authorization": f"Bearer {token.reveal()}"}
    replay_id: str | None = None
    replayed = anyio.Event()
    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT, trust_env=False) as client,
            streamable_http_client(url, http_client=client) as (from_server, to_server),
            anyio.create_task_group() as tg,
        ):

            async def client_to_server() -> None:
                nonlocal how, replay_id
                if first is not None:
                    init = relay.init
                    message = first.message
                    if init is not None and not (isinstance(message, JSONRPCRequest)
                                                 and message.method == "initialize"):
                        relay.replays += 1
                        replay_id = f"pocketmcp-bridge-replay-{relay.replays}"
                        again = init.model_copy(update={"id": replay_id})
                        relay.stamper.outbound(again)
                        await to_server.send(SessionMessage(again))
                        with anyio.fail_after(REPLAY_S):
                            await replayed.wait()
                        if relay.initialized:
                            await to_server.send(SessionMessage(JSONRPCNotification(
                                jsonrpc="2.0", method="notifications/initialized")))
                    await to_server.send(relay.outbound(message))
                async for item in from_client:
                    if isinstance(item, Exception):
                        log.warning("bad_message_from_client", error=str(item)[:200])
                        continue
                    await to_server.send(relay.outbound(item.message))
                how = "stdin closed"
                tg.cancel_scope.cancel()

            async def watch_server() -> None:
                # A server that is gone ends no stream while the client is idle (nothing
                # is in flight), so its process is checked.
                while True:
                    await anyio.sleep(WATCH_S)
                    if not alive(upstream.pid):
                        break
                tg.cancel_scope.cancel()

            async def server_to_client() -> None:
                async for item in from_server:
                    if isinstance(item, Exception):
                        log.warning("bad_message_from_server", error=str(item)[:200])
                        continue
                    message = item.message
                    if replay_id is not None and isinstance(
                            message, JSONRPCResponse | JSONRPCError) and message.id == replay_id:
                        relay.stamper.inbound(message)
                        replayed.set()  # the client had its answer from the first server
                        continue
                    relay.inbound(message)
                    await to_client.send(SessionMessage(message))
                tg.cancel_scope.cancel()

            tg.start_soon(watch_server, name="pocketmcp.bridge.watch")
            tg.start_soon(client_to_server, name="pocketmcp.bridge.up")
            tg.start_soon(server_to_client, name="pocketmcp.bridge.down")
    except* (httpx2.HTTPError, OSError, TimeoutError) as group:  # the server went meanwhile
        log.warning("server_unreachable", url=url, error=str(group.exceptions[0])[:200])
    return how
