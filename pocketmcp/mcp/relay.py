"""What the bridge (mcp/bridge.py) knows of the messages it relays, without the MCP SDK: which
line is a request it must see answered, the error replies it makes itself, and `Relay`, what
it keeps across servers (the client's `initialize`, the requests in flight).

The bridge judges no message: a line that is not one valid JSON-RPC message is sent to the
server like any other, and the server's screen (mcp/jsonrpc.py, the same one a process
serving alone applies to its stdin) answers it; the bridge hands that answer to the client.
Only what never reaches a server is answered here: a line over the size limit, with the
words a process serving alone uses.
"""

from __future__ import annotations

import json
from typing import Any

from anyio.streams.memory import MemoryObjectSendStream

from pocketmcp.mcp.lines import MAX_LINE_BYTES
from pocketmcp.mcp.streamable import METHOD, NAME, NAME_BEARING, VERSION, VERSION_META, header_value

SERVER_GONE = -32000  # the JSON-RPC error of a request the server's end left unanswered
PARSE_ERROR = -32700
INVALID_REQUEST = -32600

Out = MemoryObjectSendStream[str]


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


def well_formed(message: dict[str, Any] | None) -> bool:
    """Whether `message` looks like one JSON-RPC message that no screen refuses outright."""
    if message is None or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str) and ("id" not in message or valid_id(
            message["id"]))
    return valid_id(message.get("id")) and ("result" in message or "error" in message)


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
    ident = message.get("id") if message is not None else None
    return (answer.get("id") == (ident if valid_id(ident) else None)
            and error.get("code") in (PARSE_ERROR, INVALID_REQUEST) and not well_formed(message))


class Relay:
    """What a bridge keeps across servers: the client's `initialize` (repeated to a new
    server), whether it was confirmed, the negotiated version, and the requests in flight
    (each with its line)."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.init: dict[str, Any] | None = None
        self.initialized = False
        self.version: str | None = None
        self.pending: dict[str | int, str] = {}
        self.replays = 0

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
            if isinstance(ident, str | int):
                self.pending.pop(ident, None)
            if self.init is not None and ident == self.init.get("id"):
                self._note_version(message)
        # One line each: a newline in JSON is only whitespace, and a message that is not
        # JSON still reaches the client whole.
        await self.out.send(data.replace("\n", " "))
        return False

    def _note_version(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.version = version if isinstance(version, str) else None

    async def fail_pending(self, why: str, code: str = "SERVER_UNAVAILABLE") -> None:
        """Answer every request still in flight: its server has gone."""
        for request_id in sorted(self.pending, key=str):
            await self.out.send(error_reply(request_id, why, code))
        self.pending.clear()
