"""A stdio server that only relays: every JSON-RPC message from the client that started it
goes to the HTTP server of the same index over MCP Streamable HTTP, and every message back,
unchanged, through the SDK's own transports. It loads no model and opens no index.

It ends when the client closes stdin, on SIGTERM or SIGINT (the HTTP session is closed), or
when the HTTP server goes away (the client then sees the server exit and may start it again,
and the next start serves on its own).
"""

from __future__ import annotations

import signal
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
from mcp_types import PROTOCOL_VERSION_META_KEY, JSONRPCRequest, JSONRPCResponse

from pocketmcp import logs
from pocketmcp.core.secret import Secret
from pocketmcp.mcp.discovery import Published, alive
from pocketmcp.mcp.lines import stdin_lines

log = logs.get("pocketmcp.bridge")

# The SDK client's timeouts: 30 s to connect and write, 5 minutes between events of a stream.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)
# How often the bridge checks that the server's process still runs.
WATCH_S = 0.5


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


async def bridge(upstream: Published, token: Secret) -> int:
    """Relay stdin/stdout to `upstream` until either side ends; 1 when the server went
    away first."""
    url = upstream.mcp_url
    log.info("bridging", url=url, pid=upstream.pid)
    stamper = Stamper()
    ended = "stdin closed"
    headers = {"Authorization": f"Bearer {token.reveal()}"}
    # The stdio side outlives the HTTP session (closed first, so the server hears of it), and
    # its reader waits for stdin to close: unless that is why the relay ended, it is cancelled.
    with anyio.CancelScope() as stdio_scope:
        async with stdio_server(stdin=stdin_lines()) as (from_client, to_client):  # type: ignore[arg-type]
            async with (
                httpx2.AsyncClient(headers=headers, timeout=TIMEOUT, trust_env=False) as client,
                streamable_http_client(url, http_client=client) as (from_server, to_server),
                anyio.create_task_group() as tg,
            ):

                async def on_signal() -> None:
                    nonlocal ended
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for signum in signals:
                            ended = signal.Signals(signum).name
                            tg.cancel_scope.cancel()

                async def client_to_server() -> None:
                    async for item in from_client:
                        if isinstance(item, Exception):
                            log.warning("bad_message_from_client", error=str(item)[:200])
                            continue
                        stamped = stamper.outbound(item.message)
                        metadata = ClientMessageMetadata(headers=stamped) if stamped else None
                        await to_server.send(SessionMessage(item.message, metadata=metadata))
                    tg.cancel_scope.cancel()

                async def watch_server() -> None:
                    # A server that is gone ends no stream while the client is idle (nothing
                    # is in flight), so its process is checked.
                    nonlocal ended
                    while True:
                        await anyio.sleep(WATCH_S)
                        if not alive(upstream.pid):
                            break
                    ended = "server gone"
                    tg.cancel_scope.cancel()

                async def server_to_client() -> None:
                    nonlocal ended
                    async for item in from_server:
                        if isinstance(item, Exception):
                            log.warning("bad_message_from_server", error=str(item)[:200])
                            continue
                        stamper.inbound(item.message)
                        await to_client.send(SessionMessage(item.message))
                    ended = "server gone"
                    tg.cancel_scope.cancel()

                tg.start_soon(on_signal, name="pocketmcp.signals")
                tg.start_soon(watch_server, name="pocketmcp.bridge.watch")
                tg.start_soon(client_to_server, name="pocketmcp.bridge.up")
                tg.start_soon(server_to_client, name="pocketmcp.bridge.down")
            await to_client.aclose()  # the stdout writer ends once it has written the rest
            if ended != "stdin closed":
                stdio_scope.cancel()
    log.info("bridge_stopped", reason=ended)
    return 1 if ended == "server gone" else 0
