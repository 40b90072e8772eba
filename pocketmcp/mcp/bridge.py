"""A stdio server that only relays: every JSON-RPC line from the client that started it goes to
the HTTP server of the same index as one POST of MCP Streamable HTTP, and every message back
(a JSON body, or the events of an SSE stream) goes to stdout as one line, unchanged. It loads
no model, opens no index and imports neither the MCP SDK nor pydantic: it starts in a few
tenths of a second and stays small (bench/shared.py), so that every editor window can have one.

It ends when the client closes stdin, or on SIGTERM or SIGINT (the HTTP session is closed).
When the HTTP server goes away, the writes still in flight are answered at once with an error
saying that whether they were applied is not known (WRITE_UNCONFIRMED). With a way to
reconnect (a shared server, mcp/sharing.py), the reads in flight (requests that change
nothing) are sent once again, to the next server (started anew when none runs); otherwise
the bridge waits for the client's next request and has a server again for it. Either way it
repeats the client's `initialize` to the new server: the client sees one session throughout.
A server still there that answers nothing while a request waits (stopped, stuck) is taken as
gone after HUNG_S: its requests get SERVER_NOT_ANSWERING. A request that finds no server is
answered with an error saying why; nothing hangs. Without a way to reconnect, the bridge
ends, and the client sees the server exit. One request that fails while the server still
runs (its connection reset, an HTTP error answer) is answered with an error on its own; a
session the server has forgotten (404) is opened anew, the `initialize` repeated.

The client's own tool profile, title and instructions hold (mcp/presented.py): the server's
answers are shown to it as a process serving it alone would give them.

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
from typing import Any

import anyio
import anyio.abc
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream

from pocketmcp import logs
from pocketmcp.core.secret import Secret
from pocketmcp.errors import PocketError
from pocketmcp.mcp import early
from pocketmcp.mcp.discovery import Published, alive, answers
from pocketmcp.mcp.lines import OVERSIZE, stdin_lines, stdout_lines
from pocketmcp.mcp.presented import Presentation, refused_call
from pocketmcp.mcp.relay import (
    Connection,
    Relay,
    SessionGone,
    error_reply,
    is_request,
    parsed,
    too_large,
    well_formed,
)

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

Upstream = tuple[Published, Secret]
Reconnect = Callable[[], Awaitable[Upstream]]
Lines = MemoryObjectReceiveStream[str]


async def bridge(upstream: Upstream | None, *, reconnect: Reconnect | None = None,
                 presentation: Presentation | None = None) -> int:
    """Relay stdin/stdout to `upstream` (and, with `reconnect`, to the servers after it)
    until stdin closes or a signal comes, its answers shown as `presentation` (the client's
    own settings) says; 1 when the server went away first and there was no way to
    reconnect. Without `upstream`, one is had from `reconnect` in the background at once,
    while the client's handshake is answered here (mcp/early.py)."""
    ended = "stdin closed"
    lines = stdin_lines()
    async with lines, stdout_lines() as out, anyio.create_task_group() as life:
        relay = Relay(out, presentation)

        async def on_signal() -> None:
            nonlocal ended
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    ended = signal.Signals(signum).name
                    life.cancel_scope.cancel()

        async def run() -> None:
            nonlocal ended
            current: Upstream | None = upstream
            first: list[str] = []
            if current is None and reconnect is not None:
                starting = Starting(reconnect)
                life.start_soon(starting.run, name="pocketmcp.bridge.start")
                first, current = await _next_server(relay, lines, starting.wait, "starting")
            while current is not None:
                how = await _relay(relay, *current, lines, first)
                if how == "stdin closed":
                    break
                # A server that went away costs no read: each in flight goes to the next.
                again = relay.take_reads() if how == "server gone" and reconnect else []
                await _fail_in_flight(relay, how, current[0].pid)
                if how == "session gone":  # the same server, on a new session
                    first, current = await _next_server(relay, lines, reconnect or _same(current),
                                                        how)
                    continue
                if reconnect is None:
                    ended = "server gone"
                    break
                if again:
                    first, current = again, await _again(relay, reconnect, again)
                    if current is not None:
                        continue
                first, current = await _next_server(relay, lines, reconnect, how)
            life.cancel_scope.cancel()

        life.start_soon(on_signal, name="pocketmcp.signals")
        life.start_soon(run, name="pocketmcp.bridge")
    log.info("bridge_stopped", reason=ended)
    return 1 if ended == "server gone" else 0


GONE = {  # how a server left the requests in flight: what happened, and the reads' code
    "server hung": (f"has not answered for {HUNG_S:.0f} s (stopped, or stuck)",
                    "SERVER_NOT_ANSWERING"),
    "server gone": ("went away", "SERVER_UNAVAILABLE"),
    "session gone": ("ended this session", "SERVER_UNAVAILABLE"),
}


async def _fail_in_flight(relay: Relay, how: str, pid: int) -> None:
    """Answer the requests still in flight on a server that left them (`how`): a read was
    not answered and may be sent again (another server is found or started for it); a write
    reached the server, which may have applied it (stopped and resumed, or died after)."""
    what, code = GONE[how]
    said = f"the server (pid {pid}) {what} while this request was in flight"
    await relay.fail_pending(
        f"{said}: it was not answered; send it again", code,
        writes=(f"{said}, after it reached the server and before any answer: whether it was "
                "applied is not known; look (get_document, list_documents) before sending it "
                "again"))


class Starting:
    """A server had in the background (started when none runs), awaited by the first
    request that needs it; once that start has failed, each later request tries anew."""

    def __init__(self, reconnect: Reconnect) -> None:
        self.reconnect = reconnect
        self.done = anyio.Event()
        self.found: Upstream | None = None
        self.error: PocketError | OSError | None = None
        self.told = False  # whether a request was answered with `error`

    async def run(self) -> None:
        try:
            self.found = await self.reconnect()
        except (PocketError, OSError) as exc:
            self.error = exc
        finally:
            self.done.set()

    async def wait(self) -> Upstream:
        await self.done.wait()
        if self.error is None:
            assert self.found is not None
            return self.found
        if self.told:
            return await self.reconnect()
        self.told = True
        raise self.error


async def _again(relay: Relay, reconnect: Reconnect, lines: list[str]) -> Upstream | None:
    """The next server for the reads in flight (`lines`) when their server went away, or
    None when none can be had (each is then answered with why)."""
    log.warning("server_gone", action=f"{len(lines)} read(s) in flight go to the next server")
    try:
        found = await reconnect()
    except (PocketError, OSError) as exc:
        log.warning("no_server", error=str(exc))
        for line in lines:
            ident = parsed(line)
            await relay.out.send(error_reply(ident.get("id") if ident else None, (
                f"the shared server of this index has gone and none could be started: {exc}")))
        return None
    log.info("server_found", url=found[0].url, pid=found[0].pid, resent=len(lines))
    return found


def _same(current: Upstream) -> Reconnect:
    async def same() -> Upstream:
        return current
    return same


async def _next_server(relay: Relay, lines: Lines, reconnect: Reconnect,
                       why: str = "server gone") -> tuple[list[str], Upstream | None]:
    """Wait for the client's next request, then a server for it (started anew when none
    runs); a request that finds none is answered with an error saying why. (None, None)
    once stdin has closed."""
    if why == "starting":
        log.info("server_starting", action="the handshake is answered here meanwhile")
    else:
        log.warning(why.replace(" ", "_"), action="a server is looked for at the next request")
    async for line in lines:
        if not line.strip():
            continue
        if line.rstrip("\n") == OVERSIZE:
            await relay.out.send(too_large())
            continue
        message = parsed(line)
        if message is not None and is_request(message) and await _answered_here(relay, message):
            continue
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
                    "no shared server of this index could be started: " if why == "starting"
                    else "the shared server of this index has gone and none could be started: "
                ) + f"{exc}; SHARE=off serves in the editor's own process"))
            continue
        log.info("server_found", url=found[0].url, pid=found[0].pid)
        return [line], found
    return [], None


async def _answered_here(relay: Relay, message: dict[str, Any]) -> bool:
    """Answer the client's `initialize` or `tools/list` while no server is at hand, as the
    server would (mcp/early.py); whether it was."""
    if relay.presentation is None:
        return False
    method = message.get("method")
    if method == "initialize" and relay.init is None:
        answer = early.initialize(message, relay.presentation)
        if answer is None:
            return False
        relay.init, relay.version = message, answer[1]
        await relay.out.send(answer[0])
        return True
    if method == "tools/list" and relay.init is not None:
        listed = early.tools_list(message, relay.presentation)
        if listed is not None:
            await relay.out.send(listed)
            return True
    return False


async def _relay(relay: Relay, upstream: Published, token: Secret, lines: Lines,
                 first: list[str]) -> str:
    """Relay to one server until stdin closes ("stdin closed"), the server goes ("server
    gone", "session gone") or stops answering ("server hung"). `first`: client lines to
    send once the client's `initialize` is repeated."""
    url = upstream.mcp_url
    log.info("bridging", url=url, pid=upstream.pid)
    relay.hold(first)  # answered even when this server is lost before they are posted
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
                            refused = relay.presentation and refused_call(
                                message["id"], message, relay.presentation)
                            if refused:  # a tool outside this client's profile
                                relay.pending.pop(message["id"], None)  # held if first
                                await relay.out.send(refused)
                                return
                            tg.start_soon(connection.relayed, line, message)
                            return
                        await connection.post(line, message)
                        if message is not None and (
                                message.get("method") == "notifications/initialized"):
                            relay.initialized = True
                            tg.start_soon(connection.listen, name="pocketmcp.bridge.listen")

                    async def client_to_server() -> None:
                        nonlocal how
                        if first:
                            await _replay(relay, connection, tg, first[0])
                        for line in first:
                            await send(line)
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
                                # Its own connection: the relay's pool may be full of
                                # streams in flight, which says nothing of the server.
                                if await answers(upstream.url, timeout_s=PROBE_S) is not None:
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
