"""The stdio front: the first requests answered before the MCP SDK is imported.

The SDK's import is most of a second of CPU (its protocol types), on a machine where the
runtime starts at the same time. The front answers what an editor sends first, without the
SDK: `initialize` (the protocol version negotiated as the SDK does, the same capabilities,
serverInfo and instructions), `notifications/initialized`, `ping`, `tools/list` and calls
of `search` (validated as the SDK validates them; the same result, or tool error). Its
answers are the SDK's own, recorded in front.json by mcp/frontgen.py for the SDK version
installed; with another version the front stands aside. Anything else waits, in order.

The SDK is imported once the front has answered a search, or the runtime is ready (or has
failed), or a message waits for it, whichever comes first, and no search is running (the
import holds Python's lock most of the time, and would slow it down; a search still waiting
for the index does not count: the writer, which a watched folder's first scan needs, starts
after the import), and, unless a message waits for it, none has run for QUIET_S (so searches
asked one after another are answered first; SDK_AFTER_S after start at the latest). Then it
takes the session over
(mcp/stdio.py): it is fed the client's `initialize` again (its reply dropped) and
`notifications/initialized`, then every line the front left, then every line to come, in
order. A search the front started is still answered by the front (and cancelled by it).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pydantic_core
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from pydantic import ValidationError

from pocketmcp import __version__, logs
from pocketmcp.errors import PocketError
from pocketmcp.mcp import searching
from pocketmcp.mcp.calllog import error_text, logged_call, render
from pocketmcp.mcp.lines import stdin_lines, stdout_lines
from pocketmcp.plans import Reading
from pocketmcp.runtime import Runtime

log = logs.get("pocketmcp.front")

DATA = Path(__file__).with_name("front.json")
# The id the replayed `initialize` carries to the SDK (its reply is dropped).
HANDOVER_ID = "pocketmcp.front.initialize"
# The SDK is imported this long after start at the latest.
SDK_AFTER_S = 5.0
# ... and, before then, only once no search has run for this long (an agent's searches in a
# row are all answered before the import holds Python's lock), unless a line needs it.
QUIET_S = 0.25
# A line longer than this is left to the SDK (a search's arguments are far shorter).
MAX_FRONT_LINE = 65536

# Runs the SDK's session on the lines it is given, writing to `out`, dropping the reply to
# the request with the id given.
SdkSession = Callable[[ObjectReceiveStream[str], ObjectSendStream[str], str | None],
                      Awaitable[None]]


@cache
def recorded() -> dict[str, Any] | None:
    """The SDK's answers as front.json records them; None when they are missing or recorded
    for another SDK version than the one installed."""
    try:
        data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
        installed = version("mcp")
    except (OSError, ValueError, PackageNotFoundError) as exc:
        log.warning("front_off", reason=repr(exc))
        return None
    if data.get("sdk") != installed:
        log.warning("front_off", reason=f"front.json is for mcp {data.get('sdk')}, not "
                                        f"{installed}: python -m pocketmcp.mcp.frontgen")
        return None
    return data


def dumps(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def reply(ident: Any, result: dict[str, Any]) -> str:
    return dumps({"jsonrpc": "2.0", "id": ident, "result": result})


def _message(line: str) -> dict[str, Any] | None:
    """`line` as a request or notification the front may answer; None for anything else
    (left to the SDK, whose screen answers what is not valid)."""
    if len(line) > MAX_FRONT_LINE:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if (not isinstance(message, dict) or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str)
            or not set(message) <= {"jsonrpc", "id", "method", "params"}
            or not isinstance(message.get("params", {}), dict)):
        return None
    if "id" in message:
        ident = message["id"]
        if not (isinstance(ident, str) or (isinstance(ident, int)
                                           and not isinstance(ident, bool))):
            return None
    return message


def _initialize_params(params: dict[str, Any]) -> bool:
    """Whether `initialize`'s params are plainly what the SDK accepts."""
    client = params.get("clientInfo")
    capabilities = params.get("capabilities")
    return (set(params) == {"protocolVersion", "capabilities", "clientInfo"}
            and isinstance(params["protocolVersion"], str)
            and isinstance(capabilities, dict)
            and all(isinstance(v, dict) for v in capabilities.values())
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str))


def _search_args(params: dict[str, Any]) -> searching.SearchArgs | None:
    """A `tools/call` of search's arguments, when the SDK would take them as they are."""
    meta = params.get("_meta", {})
    arguments = params.get("arguments")
    if (not set(params) <= {"name", "arguments", "_meta"} or params.get("name") != "search"
            or not isinstance(meta, dict) or not set(meta) <= {"progressToken"}
            or not isinstance(arguments, dict)):
        return None
    for key, value in arguments.items():
        if key != "query" and isinstance(value, str):
            with suppress(ValueError, RecursionError):
                json.loads(value)  # the SDK would parse it first
                return None
    try:
        return searching.SearchArgs.model_validate(arguments)
    except ValidationError:
        return None  # the SDK's error says what is wrong


class Front:
    """What the front knows of the session, and its answers."""

    def __init__(self, rt: Runtime, title: str, instructions: str,
                 out: ObjectSendStream[str], tg: anyio.abc.TaskGroup,
                 wire: dict[str, Any] | None) -> None:
        self.rt, self.title, self.instructions = rt, title, instructions
        self.out, self.tg, self.wire = out, tg, wire
        self.active = True  # until the SDK has the session
        self.aside = wire is None  # every line is left to the SDK
        self.protocol: str | None = None  # negotiated by `initialize`
        self.replay: list[str] = []  # `initialize` (with HANDOVER_ID), then `initialized`
        self.pending: list[str] = []  # lines left to the SDK, in order
        self.running: dict[str | int, anyio.CancelScope] = {}  # searches, by request id
        self.due = anyio.Event()  # time to import the SDK
        self.searching = 0  # searches past their wait for the index
        self.idle = anyio.Event()  # none is (replaced while one is)
        self.idle.set()
        self.quiet_since = time.perf_counter()  # when the last search started or ended
        self.needed = anyio.Event()  # a line waits for the SDK
        if self.aside:
            self.due.set()

    async def take(self, line: str) -> None:
        """Answer `line`, or keep it for the SDK."""
        message = None if self.aside else _message(line)
        answer = self._answer(message) if message is not None else None
        if answer is None:
            self.pending.append(line)
            self.due.set()
            self.needed.set()
        elif answer:
            await self.out.send(answer)

    def cancels(self, line: str) -> bool:
        """Whether `line` cancels a search the front runs (it is cancelled: no answer)."""
        if not self.running or "notifications/cancelled" not in line:
            return False
        message = _message(line)
        if message is None or message["method"] != "notifications/cancelled" \
                or "id" in message:
            return False
        target = message.get("params", {}).get("requestId")
        scope = self.running.get(target) if isinstance(target, str | int) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    def _answer(self, message: dict[str, Any]) -> str | None:
        """The reply to `message` ("" for none); None to leave it to the SDK. Decides at
        once (no await): lines stay in order."""
        assert self.wire is not None
        method, params = message["method"], message.get("params", {})
        request = "id" in message
        if self.protocol is None:
            if method == "initialize" and request and _initialize_params(params):
                return self._initialize(message)
            self.aside = True  # a session the front does not open is the SDK's alone
            return None
        if method == "notifications/initialized" and not request and not params \
                and len(self.replay) == 1:
            self.replay.append(dumps(message))
            return ""
        if method == "ping" and request and not params:
            return reply(message["id"], {})
        if method == "tools/list" and request and not params:
            recorded = self.wire["versions"][self.protocol]
            tools = [t for t in self.wire["tools"][recorded["tools"]]
                     if t["name"] in self.rt.config.tools]
            return reply(message["id"], {"tools": tools})
        if method == "notifications/cancelled" and not request and self.cancels(dumps(message)):
            return ""
        if (method == "tools/call" and request and "search" in self.rt.config.tools
                and (args := _search_args(params)) is not None
                and message["id"] not in self.running):
            scope = self.running[message["id"]] = anyio.CancelScope()
            self.tg.start_soon(self._search, message["id"], args, scope,
                               name="pocketmcp.front.search")
            return ""
        return None

    def _initialize(self, message: dict[str, Any]) -> str:
        assert self.wire is not None
        params = message["params"]
        asked = params["protocolVersion"]
        protocol = self.protocol = asked if asked in self.wire["versions"] else \
            self.wire["latest"]
        result = copy.deepcopy(self.wire["versions"][protocol]["initialize"])
        result["serverInfo"].update(name=self.title, version=__version__)
        result["instructions"] = self.instructions
        self.replay.append(dumps({**message, "id": HANDOVER_ID}))
        log.debug("front_initialize", protocol=protocol, client=params["clientInfo"]["name"])
        return reply(message["id"], result)

    async def _search(self, ident: str | int, args: searching.SearchArgs,
                      scope: anyio.CancelScope) -> None:
        """Answer one search as the SDK's tool would (unless the client cancels it)."""
        assert self.wire is not None and self.protocol is not None
        started = False

        async def reading() -> Reading:
            nonlocal started
            found = await self.rt.reading()
            started = True
            self.searching += 1
            self.quiet_since = time.perf_counter()
            if self.idle.is_set():
                self.idle = anyio.Event()
            return found

        with scope:
            try:
                async with logged_call("search", top_k=args.top_k, mode=args.mode) as counts:
                    result = render(await searching.run(reading, args, counts))
                text = pydantic_core.to_json(result, fallback=str, indent=2).decode()
                body: dict[str, Any] = {
                    "content": [{"type": "text", "text": text}],
                    "structuredContent": result.model_dump(mode="json", by_alias=True),
                    "isError": False}
            except PocketError as exc:
                body = _tool_error(f"Error executing tool search: {error_text(exc)}")
            except Exception as exc:  # as the SDK's boundary: one request fails, no more
                log.error("front_search_crashed", error=repr(exc), exc_info=exc)
                body = _tool_error("Error executing tool search")
        del self.running[ident]
        try:
            if scope.cancelled_caught:
                return  # a cancelled request is never answered
            members = self.wire["versions"][self.protocol]["call"]
            await self.out.send(reply(ident, {k: v for k, v in body.items() if k in members}))
            self.due.set()
        finally:
            self.searching -= started
            self.quiet_since = time.perf_counter()
            if not self.searching:
                self.idle.set()


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def serve(rt: Runtime, title: str, instructions: str,
                load_sdk: Callable[[], Awaitable[SdkSession]], started: float) -> None:
    """Serve the client on stdin/stdout until it closes stdin (or until cancelled)."""
    lines = stdin_lines()
    to_sdk, sdk_lines = anyio.create_memory_object_stream[str](16)
    sdk_done = anyio.Event()
    async with stdout_lines() as out, anyio.create_task_group() as tg:
        front = Front(rt, title, instructions, out, tg, recorded())
        log.debug("front_up", seconds=round(time.perf_counter() - started, 3))

        async def due() -> None:
            """Until the SDK is due (SDK_AFTER_S at the latest)."""
            with anyio.move_on_after(SDK_AFTER_S):
                async with anyio.create_task_group() as either:
                    async def until(wait: Callable[[], Awaitable[object]]) -> None:
                        with suppress(PocketError):  # a failed start: the SDK says so
                            await wait()
                        either.cancel_scope.cancel()

                    either.start_soon(until, front.due.wait)
                    either.start_soon(until, rt.started)

        async def run_sdk(session: SdkSession, drop: str | None) -> None:
            try:
                await session(sdk_lines, out, drop)
            finally:
                sdk_done.set()

        async def hand_over() -> None:
            await due()
            latest = started + SDK_AFTER_S
            while True:
                while not front.idle.is_set():  # the import would slow the searches down
                    await front.idle.wait()  # (not those waiting for the index: it may need it)
                now = time.perf_counter()
                wait = min(front.quiet_since + QUIET_S, latest) - now
                if wait <= 0 or front.needed.is_set():
                    break
                with anyio.move_on_after(wait):  # a search may start meanwhile
                    await front.needed.wait()
            session = await load_sdk()
            tg.start_soon(run_sdk, session, HANDOVER_ID if front.replay else None,
                          name="pocketmcp.sdk")
            for line in front.replay[:2]:
                await to_sdk.send(line)
            while front.pending:
                await to_sdk.send(front.pending.pop(0))
            front.active = False  # no await since the last look at `pending`
            log.debug("sdk_up", seconds=round(time.perf_counter() - started, 3))

        tg.start_soon(hand_over, name="pocketmcp.handover")
        async with lines:
            async for line in lines:
                if not line.strip():
                    continue  # a blank line is no message
                if front.active:
                    await front.take(line)
                elif not front.cancels(line):
                    await to_sdk.send(line)
        if not front.active:  # the SDK ends its session as it does when stdin closes
            to_sdk.close()
            await sdk_done.wait()
        tg.cancel_scope.cancel()
