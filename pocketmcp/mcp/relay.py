"""What the bridge (mcp/bridge.py) knows of the messages it relays, without the MCP SDK: which
line is a request it must see answered, the error replies it makes itself, `Relay`, what it
keeps across servers (the client's `initialize`, the requests in flight), and `Connection`,
one HTTP session with one server.

The bridge judges no message: a line that is not one valid JSON-RPC message is sent to the
server like any other, and the server's screen (mcp/jsonrpc.py, the same one a process
serving alone applies to its stdin) answers it; the bridge hands that answer to the client.
Only what never reaches a server is answered here: a line over the size limit, with the
words a process serving alone uses.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectSendStream

from pocketmcp import logs
from pocketmcp.mcp.discovery import Published, alive, answers
from pocketmcp.mcp.lines import MAX_LINE_BYTES
from pocketmcp.mcp.presented import Presentation, present
from pocketmcp.mcp.streamable import (
    METHOD,
    NAME,
    NAME_BEARING,
    SESSION,
    VERSION,
    VERSION_META,
    events,
    header_value,
)

log = logs.get("pocketmcp.bridge")

SERVER_GONE = -32000  # the JSON-RPC error of a request the server's end left unanswered
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
CLOSE_S = 2.0  # how long closing the HTTP session may take
LISTEN_RETRIES = 3  # the server's own stream, opened again after it broke

Out = MemoryObjectSendStream[str]

# The tools that change nothing (their annotations say readOnlyHint): a call in flight when
# its server dies is sent once again, to the next server. Any other call may have been
# carried out: it is never repeated blindly.
READ_TOOLS = frozenset({"search", "find_similar_documents", "list_documents", "links",
                        "get_document", "list_libraries", "status"})


def error_reply(request_id: Any, why: str, code: str = "SERVER_UNAVAILABLE") -> str:
    """The error a request gets when its server cannot answer it: `why`, after its `code`
    (a PocketError code, as tool errors start)."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "error": {"code": SERVER_GONE, "message": f"{code}: {why}"}})


def too_large() -> str:
    """The answer to a line over MAX_LINE_BYTES (mcp/jsonrpc.py's `too_large`)."""
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": PARSE_ERROR,
        "message": f"Parse error: a message may be at most {MAX_LINE_BYTES} bytes long"}})


def parsed(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def valid_id(value: Any) -> bool:
    """Whether `value` is a JSON-RPC id a reply can bear (a string or an integer)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def is_request(message: dict[str, Any] | None) -> bool:
    """A request whose answer the bridge waits for: a method and a valid id. (One with an id
    no reply can bear is sent on like any line: the server's screen answers it.)"""
    return message is not None and "method" in message and valid_id(message.get("id"))


def is_read(message: dict[str, Any] | None) -> bool:
    """Whether the request `message` changes nothing (any method but `tools/call`, and the
    calls of READ_TOOLS): safe to send again."""
    if message is None or message.get("method") != "tools/call":
        return True
    params = message.get("params")
    return isinstance(params, dict) and params.get("name") in READ_TOOLS


def well_formed(message: dict[str, Any] | None) -> bool:
    """Whether `message` looks like one JSON-RPC message that no screen refuses outright."""
    if message is None or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str) and ("id" not in message or valid_id(
            message["id"]))
    return valid_id(message.get("id")) and (isinstance(message.get("result"), dict)
                                            or isinstance(message.get("error"), dict))


def is_screened(answer: dict[str, Any] | None, message: dict[str, Any] | None) -> bool:
    """Whether `answer`, a server's HTTP error answer to the client's `message`, is to be
    passed on as it is: the answer to that request (its id), or the error the server's
    screen gives a line that is not one valid JSON-RPC message (id null)."""
    error = answer.get("error") if answer is not None else None
    if answer is None or not isinstance(error, dict):
        return False
    if is_request(message):  # an answer bearing its id is its answer
        assert message is not None
        return bool(answer.get("id") == message["id"])
    if error.get("code") not in (PARSE_ERROR, INVALID_REQUEST):
        return False
    ident = message.get("id") if message is not None else None
    if valid_id(ident):  # a response the screen refused bears its id
        return bool(answer.get("id") == ident)
    return answer.get("id") is None and not well_formed(message)


class Relay:
    """What a bridge keeps across servers: the client's `initialize` (repeated to a new
    server), whether it was confirmed, the negotiated version, and the requests in flight
    (each with its line)."""

    def __init__(self, out: Out, presentation: Presentation | None = None) -> None:
        self.out = out
        self.presentation = presentation  # the client's own settings, shown on answers
        self.init: dict[str, Any] | None = None
        self.initialized = False
        self.version: str | None = None
        self.pending: dict[str | int, str] = {}
        self.resent: set[str | int] = set()  # requests sent once again already
        self.replays = 0

    def take_reads(self) -> list[str]:
        """The requests in flight that change nothing and were not sent again yet, taken
        from those in flight (to be sent to the next server)."""
        again = [ident for ident, line in self.pending.items()
                 if ident not in self.resent and is_read(parsed(line))]
        self.resent.update(again)
        return [self.pending.pop(ident) for ident in again]

    def headers(self, message: dict[str, Any] | None) -> dict[str, str]:
        """The per-message headers the SDK's client would send (its `Stamper`)."""
        if message is not None and message.get("method") == "initialize":
            return {}
        params = message.get("params") if message is not None else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(VERSION_META) if isinstance(meta, dict) else None
        if (message is not None and is_request(message) and isinstance(version, str)
                and isinstance(message["method"], str)):
            headers = {VERSION: version, METHOD: message["method"]}
            key = NAME_BEARING.get(message["method"])
            if key is not None and isinstance(params, dict) and isinstance(params.get(key), str):
                headers[NAME] = header_value(params[key])
            return headers
        return {VERSION: self.version} if self.version else {}

    async def deliver(self, data: str, *, swallow: Any = None) -> bool:
        """One message from the server to the client (unless it answers `swallow`: then
        True, and it is kept from the client)."""
        if not data.strip():
            return False  # an empty body (a notification's answer): nothing to relay
        message = parsed(data)
        if message is not None and ("result" in message or "error" in message):
            ident = message.get("id")
            if swallow is not None and ident == swallow:
                self._note_version(message)
                return True
            line = self.pending.pop(ident, None) if isinstance(ident, str | int) else None
            if line is not None:
                self.resent.discard(ident)  # answered: its id may come again
            if self.init is not None and ident == self.init.get("id"):
                self._note_version(message)
            result = message.get("result")
            if self.presentation is not None and isinstance(result, dict):
                asked = parsed(line) if line is not None and (
                    "tools" in result or "instructions" in result) else None
                if present(result, asked.get("method") if asked else None, self.presentation):
                    data = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        # One line each: a newline in JSON is only whitespace, and a message that is not
        # JSON still reaches the client whole.
        await self.out.send(data.replace("\n", " "))
        return False

    def _note_version(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.version = version if isinstance(version, str) else None

    async def fail_pending(self, why: str, code: str = "SERVER_UNAVAILABLE", *,
                           writes: str | None = None) -> None:
        """Answer every request still in flight: its server has gone. With `writes`, the
        requests that change something are answered so, as WRITE_UNCONFIRMED."""
        for request_id, line in sorted(self.pending.items(), key=lambda kv: str(kv[0])):
            if writes is not None and not is_read(parsed(line)):
                await self.out.send(error_reply(request_id, writes, "WRITE_UNCONFIRMED"))
            else:
                await self.out.send(error_reply(request_id, why, code))
            self.resent.discard(request_id)  # answered: its id may come again
        self.pending.clear()

    def hold(self, lines: list[str]) -> None:
        """The requests among `lines` are in flight from now (before they are posted: a
        server lost meanwhile answers them too)."""
        for line in lines:
            message = parsed(line)
            if is_request(message):
                assert message is not None
                self.pending.setdefault(message["id"], line)


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
