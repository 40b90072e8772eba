"""A stdio server that only relays: every JSON-RPC line from the client that started it goes to
the HTTP server of the same index as one POST of MCP Streamable HTTP, and every message back
(a JSON body, or the events of an SSE stream) goes to stdout as one line, unchanged. It loads
no model, opens no index and imports neither the MCP SDK nor pydantic: it starts in a few
tenths of a second and stays small (bench/shared.py), so that every editor window can have one.

It ends when the client closes stdin, or on SIGTERM or SIGINT (the HTTP session is closed).
When the HTTP server goes away, the requests still in flight are answered with an error at
once. With a way to reconnect (a shared server, mcp/sharing.py), the bridge then waits for the
client's next request, has a server again (started anew when none runs), repeats the client's
`initialize` to it and relays the request: the client sees one session throughout. A request
that finds no server is answered with an error saying why; nothing hangs. Without one (SHARE
off), the bridge ends, and the client sees the server exit. One request that fails while the
server still runs (its connection reset, an HTTP error answer) is answered with an error on
its own; a session the server has forgotten (404) is opened anew, the `initialize` repeated.

Every line the client sends is answered as a process serving alone would answer it: a line
that is not one valid JSON-RPC message (not JSON, an id no reply can bear, a batch) goes to
the server like any other, and the error its screen gives comes back (mcp/relay.py); a line
over the size limit is answered here. No line ends the bridge.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream

from pocketmcp import logs
from pocketmcp.core.secret import Secret
from pocketmcp.errors import PocketError
from pocketmcp.mcp.discovery import Published, alive, answers
from pocketmcp.mcp.lines import OVERSIZE, stdin_lines, stdout_lines
from pocketmcp.mcp.relay import (
    Relay,
    error_reply,
    is_request,
    is_screened,
    parsed,
    too_large,
    well_formed,
)
from pocketmcp.mcp.streamable import SESSION, events

log = logs.get("pocketmcp.bridge")

# 30 s to connect and write, 5 minutes between events of a stream (the SDK client's).
TIMEOUT = httpx2.Timeout(30.0, read=300.0)
WATCH_S = 0.5  # how often the bridge checks that the server's process still runs
# While a request waits (a tool call may rightly take minutes), the server's health is asked
# every PROBE_S, each answer awaited at most PROBE_S; a server that has answered none of
# them for HUNG_S is taken as not answering (stopped, or its loop stuck): the requests in
# flight get an error, and the next request finds (or starts) another server.
PROBE_S = 1.0
HUNG_S = 5.0
REPLAY_S = 30.0  # how long the repeated `initialize` may take on a server reached again
CLOSE_S = 2.0  # how long closing the HTTP session may take
LISTEN_RETRIES = 3  # the server's own stream, opened again after it broke

Upstream = tuple[Published, Secret]
Reconnect = Callable[[], Awaitable[Upstream]]
Lines = MemoryObjectReceiveStream[str]


class SessionGone(Exception):
    """The server no longer knows this bridge's HTTP session (it answered 404): the relay
    ends, and the client's `initialize` is repeated on a new one."""


class Connection:
    """One HTTP session with one server."""

    def __init__(self, relay: Relay, client: httpx2.AsyncClient, server: Published) -> None:
        self.relay = relay
        self.client = client
        self.server = server
        self.url = server.mcp_url
        self.session: str | None = None

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", **extra}
        if self.session is not None:
            headers[SESSION] = self.session
        return headers

    async def post(self, line: str, message: dict[str, Any] | None, *,
                   swallow: Any = None) -> bool:
        """POST one client message and deliver what comes back; True when the answer to
        `swallow` came (and was kept from the client)."""
        relay = self.relay
        request = is_request(message)
        if request and swallow is None:
            assert message is not None
            relay.pending[message["id"]] = line
        swallowed = False
        async with self.client.stream("POST", self.url, content=line.encode(),
                                      headers=self._headers(relay.headers(message))) as response:
            if message is not None and message.get("method") == "initialize":
                self.session = response.headers.get(SESSION) or self.session
            if response.status_code >= 400:
                await self._refused(response, message, line, tracked=request and swallow is None)
                return False
            kind = response.headers.get("content-type", "")
            if "text/event-stream" in kind:
                async for data in events(response):
                    swallowed = await relay.deliver(data, swallow=swallow) or swallowed
            elif "application/json" in kind:
                swallowed = await relay.deliver((await response.aread()).decode(
                    "utf-8", "replace").strip(), swallow=swallow)
        return swallowed

    async def _refused(self, response: httpx2.Response, message: dict[str, Any] | None,
                       line: str, *, tracked: bool) -> None:
        """An HTTP error answer. The error the server's screen gives a line that is not one
        valid JSON-RPC message, or one that bears the request's id, is passed on as it is
        (the client sees what a process serving alone answers). Any other bears no id, so a
        `tracked` request is answered here, with the server's message; a 404 while a
        session is set means the server has forgotten it (SessionGone)."""
        text = (await response.aread()).decode("utf-8", "replace").strip()
        body = parsed(text)
        if (response.status_code in (400, 413) and (tracked or not is_request(message))
                and is_screened(body, message)):
            if message is not None and is_request(message):
                self.relay.pending.pop(message["id"], None)
            await self.relay.out.send(text.replace("\n", " "))
            return
        error = body.get("error") if body is not None else None
        said = error.get("message") if isinstance(error, dict) else None
        why = f"the server answered HTTP {response.status_code}" + (
            f": {said}" if isinstance(said, str) and said else "")
        if tracked:
            assert message is not None
            self.relay.pending.pop(message["id"], None)
            await self.relay.out.send(error_reply(message["id"], why, "SERVER_REFUSED"))
        else:
            log.warning("http_refused", url=self.url, status=response.status_code)
        if response.status_code == 404 and self.session is not None:
            self.session = None  # nothing left to close
            raise SessionGone(why)

    async def relayed(self, line: str, message: dict[str, Any]) -> None:
        """POST one client request on its own: when that POST alone fails (its connection
        reset, the pool full) while the server still runs, the request is answered with an
        error and the others in flight go on; when the server has gone, the relay ends."""
        try:
            await self.post(line, message)
        except (httpx2.HTTPError, httpx2.StreamError) as exc:
            # A server killed resets its connections before its process is gone: it must
            # still answer on a new one.
            if not alive(self.server.pid) or await answers(self.server.url) is None:
                raise
            log.warning("request_failed", url=self.url, error=str(exc)[:200])
            if self.relay.pending.pop(message["id"], None) is not None:
                await self.relay.out.send(error_reply(message["id"], (
                    f"the request to the server failed ({type(exc).__name__}: {exc}); it may "
                    "not have been carried out: send it again"), "REQUEST_FAILED"))

    async def listen(self) -> None:
        """The server's own stream (its notifications outside any request)."""
        for _attempt in range(LISTEN_RETRIES):
            try:
                async with self.client.stream("GET", self.url, headers=self._headers(
                        self.relay.headers(None))) as response:
                    if response.status_code != 200:
                        return
                    async for data in events(response):
                        await self.relay.deliver(data)
            except httpx2.HTTPError:
                pass
            await anyio.sleep(1.0)

    async def close(self) -> None:
        if self.session is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_S), suppress(
                httpx2.HTTPError):
            await self.client.delete(self.url, headers=self._headers(self.relay.headers(None)))


async def bridge(upstream: Published, token: Secret, *, reconnect: Reconnect | None = None
                 ) -> int:
    """Relay stdin/stdout to `upstream` (and, with `reconnect`, to the servers after it)
    until stdin closes or a signal comes; 1 when the server went away first and there was
    no way to reconnect."""
    ended = "stdin closed"
    lines = stdin_lines()
    async with lines, stdout_lines() as out, anyio.create_task_group() as life:
        relay = Relay(out)

        async def on_signal() -> None:
            nonlocal ended
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    ended = signal.Signals(signum).name
                    life.cancel_scope.cancel()

        async def run() -> None:
            nonlocal ended
            current: Upstream | None = (upstream, token)
            first: str | None = None
            while current is not None:
                how = await _relay(relay, *current, lines, first)
                if how == "stdin closed":
                    break
                if how == "server hung":
                    await relay.fail_pending(
                        f"the server (pid {current[0].pid}) has not answered for {HUNG_S:.0f} s "
                        "(stopped, or stuck); this request may not have been carried out: send "
                        "it again (another server is found or started for it)",
                        "SERVER_NOT_ANSWERING")
                await relay.fail_pending(
                    f"the server (pid {current[0].pid}) "
                    f"{'ended this session' if how == 'session gone' else 'went away'} while "
                    "this request was in flight; it may not have been carried out: send it again")
                if how == "session gone":  # the same server, on a new session
                    first, current = await _next_server(relay, lines, reconnect or _same(current),
                                                        how)
                    continue
                if reconnect is None:
                    ended = "server gone"
                    break
                first, current = await _next_server(relay, lines, reconnect, how)
            life.cancel_scope.cancel()

        life.start_soon(on_signal, name="pocketmcp.signals")
        life.start_soon(run, name="pocketmcp.bridge")
    log.info("bridge_stopped", reason=ended)
    return 1 if ended == "server gone" else 0


def _same(current: Upstream) -> Reconnect:
    async def same() -> Upstream:
        return current
    return same


async def _next_server(relay: Relay, lines: Lines, reconnect: Reconnect,
                       why: str = "server gone") -> tuple[str | None, Upstream | None]:
    """Wait for the client's next request, then a server for it (started anew when none
    runs); a request that finds none is answered with an error saying why. (None, None)
    once stdin has closed."""
    log.warning(why.replace(" ", "_"), action="a server is looked for at the next request")
    async for line in lines:
        if not line.strip():
            continue
        if line.rstrip("\n") == OVERSIZE:
            await relay.out.send(too_large())
            continue
        message = parsed(line)
        if not is_request(message) and well_formed(message):
            if message is not None and message.get("method") == "notifications/initialized":
                relay.initialized = True
            continue  # notifications for a server that is gone: dropped
        # A request, or a line a server's screen is to answer.
        try:
            found = await reconnect()
        except (PocketError, OSError) as exc:
            log.warning("no_server", error=str(exc))
            if message is not None and is_request(message):
                await relay.out.send(error_reply(message["id"], (
                    "the shared server of this index has gone and none could be started: "
                    f"{exc}")))
            continue
        log.info("server_found", url=found[0].url, pid=found[0].pid)
        return line, found
    return None, None


async def _relay(relay: Relay, upstream: Published, token: Secret, lines: Lines,
                 first: str | None) -> str:
    """Relay to one server until stdin closes ("stdin closed") or the server goes ("server
    gone"). `first`: a client line to send once the client's `initialize` is repeated."""
    url = upstream.mcp_url
    log.info("bridging", url=url, pid=upstream.pid)
    how = "server gone"
    auth = {"Authorization": f"Bearer {token.reveal()}"}
    try:
        async with httpx2.AsyncClient(headers=auth, timeout=TIMEOUT, trust_env=False) as client:
            connection = Connection(relay, client, upstream)
            try:
                async with anyio.create_task_group() as tg:

                    async def send(line: str) -> None:
                        if not line.strip():
                            return  # a blank line is no message
                        if line.rstrip("\n") == OVERSIZE:  # never sent: answered here
                            await relay.out.send(too_large())
                            return
                        message = parsed(line)
                        if is_request(message) and message is not None and (
                                message.get("method") == "initialize"):
                            relay.init = message
                        if is_request(message) and message is not None and (
                                message.get("method") != "initialize"):
                            tg.start_soon(connection.relayed, line, message)
                            return
                        await connection.post(line, message)
                        if message is not None and (
                                message.get("method") == "notifications/initialized"):
                            relay.initialized = True
                            tg.start_soon(connection.listen, name="pocketmcp.bridge.listen")

                    async def client_to_server() -> None:
                        nonlocal how
                        if first is not None:
                            await _replay(relay, connection, tg, first)
                            await send(first)
                        async for line in lines:
                            await send(line)
                        how = "stdin closed"
                        tg.cancel_scope.cancel()

                    async def watch_server() -> None:
                        # A server that is gone ends no stream while the client is idle, so
                        # its process is checked; one that is there but answers nothing
                        # (stopped, stuck) ends none either: while a request waits, its
                        # health is asked.
                        nonlocal how
                        answered = probed = time.monotonic()
                        while True:
                            await anyio.sleep(WATCH_S)
                            if not alive(upstream.pid):
                                break
                            now = time.monotonic()
                            if not relay.pending:
                                answered = now
                            elif now - probed >= PROBE_S:
                                if await _answers(client, upstream.url):
                                    answered = time.monotonic()
                                probed = time.monotonic()
                                if probed - answered >= HUNG_S:
                                    how = "server hung"
                                    log.warning("server_not_answering", url=upstream.url,
                                                pid=upstream.pid, seconds=HUNG_S)
                                    break
                        tg.cancel_scope.cancel()

                    tg.start_soon(watch_server, name="pocketmcp.bridge.watch")
                    tg.start_soon(client_to_server, name="pocketmcp.bridge.up")
            finally:
                if how == "stdin closed" or (how != "server hung" and alive(upstream.pid)):
                    await connection.close()
    except* SessionGone as group:
        log.warning("session_forgotten", url=url, error=str(group.exceptions[0])[:200])
        how = "session gone"
    except* (httpx2.HTTPError, httpx2.StreamError, OSError, TimeoutError) as group:
        # the server went meanwhile
        log.warning("server_unreachable", url=url, error=str(group.exceptions[0])[:200])
    return how


async def _answers(client: httpx2.AsyncClient, url: str) -> bool:
    """Whether the server at `url` answers its health within PROBE_S (any HTTP answer: its
    loop runs)."""
    try:
        with anyio.fail_after(PROBE_S):
            await client.get(url + "/health", timeout=PROBE_S)
    except (httpx2.HTTPError, TimeoutError):
        return False
    return True


async def _replay(relay: Relay, connection: Connection, tg: anyio.abc.TaskGroup,
                  first: str) -> None:
    """On a server reached again: the client's `initialize` once more (its answer kept from
    the client, who had one), then `initialized`, unless `first` is an `initialize`."""
    init = relay.init
    message = parsed(first)
    if init is None or (message is not None and message.get("method") == "initialize"):
        return
    relay.replays += 1
    again = {**init, "id": f"pocketmcp-bridge-replay-{relay.replays}"}
    with anyio.fail_after(REPLAY_S):
        await connection.post(json.dumps(again), {**again, "method": "initialize"},
                              swallow=again["id"])
    if relay.initialized:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await connection.post(json.dumps(note), note)
        tg.start_soon(connection.listen, name="pocketmcp.bridge.listen")
