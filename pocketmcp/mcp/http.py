"""The HTTP face of the server: one ASGI app for many clients.

- `/mcp`: MCP Streamable HTTP; `/sse` with `/messages/`: the older HTTP+SSE transport. Both
  are the SDK's own apps over the same MCPServer, so old and new clients share one process.
  A POST to `/mcp` or `/messages/` is read (bounded) and screened first (`Screened`): a body
  that is not one valid JSON-RPC message gets the JSON-RPC error it deserves, never the SDK's
  -32602, a plain-text 400 or a silent 202.
- `/tools`: the tool manifest, the same tools as `tools/list`.
- `/health` (liveness) and `/health/ready` (readiness), for supervisors and container probes.
- `/` and the page's other paths (web/routes.py): the web page, for a browser.

`Guard` runs first for every request: the Host and Origin headers must be on the allow lists
(421 and 403 otherwise: DNS rebinding, cross-site requests), then every path but health needs
the bearer token (401); the page's paths also take the session cookie a one-time login link
sets (web/auth.py), and /login checks its own code. Refusals are JSON with a message saying
what to do (a browser asking for a page gets one saying how to sign in). No CORS headers are
ever sent. The SDK checks the token and the headers again inside its own apps.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
from collections.abc import Callable, Iterator, Sequence

import anyio
import anyio.to_thread
import mcp_types
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import (
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pocketmcp import logs
from pocketmcp.core.safe import safe_text
from pocketmcp.errors import WeakToken
from pocketmcp.mcp import jsonrpc
from pocketmcp.mcp.slowheaders import SlowHeadersClosed
from pocketmcp.ops.status_results import HealthResult
from pocketmcp.web.auth import COOKIE, Logins
from pocketmcp.web.routes import is_web_path, signin_needed

log = logs.get("pocketmcp.http")

OPEN_PATHS = frozenset({"/health", "/health/ready"})  # no token needed
SCREENED_PATHS = frozenset({"/mcp", "/messages/"})  # bodies read and screened (Screened)
LOGIN_PATH = "/login"  # checks its one-time code itself
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
CLIENT_ID = "pocketmcp-token"
# The largest body a request may have (a POST to /mcp or /messages/ above all): the same
# bound as a line on stdio. Larger ones get a JSON 413, whatever their path or content type.
MAX_BODY_BYTES = 64 * 1024 * 1024
MIN_TOKEN_CHARS = 16  # a token for a server listening beyond the loopback interface
MIN_TOKEN_DISTINCT = 8  # ... of as many different characters at least (a random one has more)


class BearerToken:
    """The one token every client presents; a TokenVerifier for the SDK's apps."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self._token)

    async def verify_token(self, token: str) -> AccessToken | None:
        if not self.matches(token):
            return None
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])


def is_loopback(host: str) -> bool:
    """Whether a server bound to `host` is reachable from this machine only."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str, host: str) -> None:
    """WeakToken (WEAK_TOKEN) when the token is too short or too simple for a server
    reachable beyond loopback: fewer than MIN_TOKEN_CHARS characters, or fewer than
    MIN_TOKEN_DISTINCT different ones (`aaaa...`, `abab...`)."""
    if is_loopback(host):
        return
    distinct = len(set(token))
    if len(token) < MIN_TOKEN_CHARS or distinct < MIN_TOKEN_DISTINCT:
        raise WeakToken("POCKETMCP_TOKEN", f"<{len(token)} characters, {distinct} different>",
                        f"a token of at least {MIN_TOKEN_CHARS} characters, at least "
                        f"{MIN_TOKEN_DISTINCT} of them different, when MCP_HOST "
                        f"({host or 'all interfaces'}) is reachable from other machines; "
                        "make a long random one (`openssl rand -hex 32`), or unset it to "
                        "use the token file beside the index")


def auth_settings(url: str) -> AuthSettings:
    """The SDK's auth for a static token: no OAuth metadata routes, nothing fetched."""
    return AuthSettings(issuer_url=url, resource_server_url=None)  # type: ignore[arg-type]


def url_host(host: str) -> str:
    """`host` as written in a URL: IPv6 addresses in brackets."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    return f"[{address}]" if address.version == 6 else str(address)


def allowed(port: int, *, bound: str, hosts: tuple[str, ...] = ()) -> TransportSecuritySettings:
    """The Host and Origin allow lists: the loopback names on `port`, the address the server
    is bound to (unless it is a wildcard), and the names configured (MCP_ALLOWED_HOSTS); a
    name without a port is allowed on `port`. The origins are those names' pages: http://
    for each, and https:// too for the names configured (a proxy in front may speak TLS)."""
    names = list(LOOPBACK_NAMES)
    if bound and not ipaddress_is_wildcard(bound):
        names.append(url_host(bound))

    def entry(name: str) -> str:
        name = name.lower()  # host names compare without case (the Host header is lowered)
        return name if _has_port(name) else f"{url_host(name)}:{port}"

    own = list(dict.fromkeys(entry(name) for name in names))
    extra = [e for e in dict.fromkeys(entry(name) for name in hosts) if e not in own]
    allowed_hosts = own + extra
    allowed_origins = [f"http://{h}" for h in allowed_hosts] + [f"https://{h}" for h in extra]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=allowed_hosts,
                                     allowed_origins=allowed_origins)


def ipaddress_is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == ""


def _has_port(name: str) -> bool:
    tail = name.rsplit("]", 1)[-1] if name.startswith("[") else name
    return ":" in tail and tail.rsplit(":", 1)[1].isdigit()


def _refusal(status: int, error: str, message: str, **headers: str) -> Response:
    return JSONResponse({"error": error, "error_description": message}, status_code=status,
                        headers=headers or None)


class Guard:
    """Checks every HTTP request before any route sees it: Host, Origin, then the token."""

    def __init__(self, app: ASGIApp, *, security: TransportSecuritySettings,
                 token: BearerToken, logins: Logins | None = None) -> None:
        self.app = app
        self.security = security
        self._headers = TransportSecurityMiddleware(security)
        self._token = token
        self._logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope = _lowered(scope)
        request = Request(scope)
        # The MCP endpoints answer an oversized body themselves, as a JSON-RPC error.
        refused = (None if scope["path"] in SCREENED_PATHS else _too_large(scope)) or (
            await self._check(request))
        if refused is not None:
            client = request.client.host if request.client else None
            log.warning("http_refused", status=refused.status_code, path=safe_text(
                scope["path"][:200]), method=scope["method"], client=client)
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _check(self, request: Request) -> Response | None:
        # The SDK's own Host and Origin rules (exact entries); is_post=False leaves the
        # Content-Type check to the MCP transports.
        bad = await self._headers.validate_request(request, is_post=False)
        if bad is not None and bad.status_code == 421:
            host = safe_text(request.headers.get("host", "")[:100])
            return _refusal(421, "invalid_host", (
                f"Host {host!r} is not a name this server answers to "
                f"({', '.join(self.security.allowed_hosts)}). Requests that reach it "
                "through another name are refused (DNS rebinding); MCP_ALLOWED_HOSTS adds "
                "names."))
        if bad is not None:
            origin = safe_text(request.headers.get("origin", "")[:100])
            return _refusal(403, "invalid_origin", (
                f"Origin {origin!r} may not call this server: web pages of other sites are "
                "refused (cross-site requests); MCP_ALLOWED_HOSTS adds names."))
        path = request.url.path
        if path in OPEN_PATHS:
            return None
        web = self._logins is not None and (path == LOGIN_PATH or is_web_path(path))
        if web and self._logins is not None and (path == LOGIN_PATH or self._logins.session_ok(
                request.cookies.get(COOKIE))):
            return None
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        challenge = {"WWW-Authenticate": 'Bearer realm="pocketmcp", error="invalid_token"'}
        if web and not presented.strip() and "text/html" in request.headers.get("accept", ""):
            return signin_needed()  # a browser without the cookie: how to sign in
        if scheme.lower() != "bearer" or not presented.strip():
            return _refusal(401, "invalid_token", (
                "this server needs a bearer token: send the header 'Authorization: Bearer "
                "<token>' with the token from POCKETMCP_TOKEN, or from the token file beside "
                "the index (SQLITE_PATH.token)"), **challenge)
        if not self._token.matches(presented.strip()):
            return _refusal(401, "invalid_token", (
                "the bearer token is wrong: use the one from POCKETMCP_TOKEN, or from the "
                "token file beside the index (SQLITE_PATH.token)"), **challenge)
        return None


def _lowered(scope: Scope) -> Scope:
    """The scope with its Host and Origin headers in lower case: host names compare without
    case (RFC 9110), and the SDK's own checks inside compare exactly."""
    headers = scope.get("headers", ())
    if not any(n in (b"host", b"origin") and v != v.lower() for n, v in headers):
        return scope
    return {**scope, "headers": [(n, v.lower() if n in (b"host", b"origin") else v)
                                 for n, v in headers]}


def _declared_size(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(scope: Scope) -> Response | None:
    """A JSON 413 for a request that declares a body over MAX_BODY_BYTES."""
    size = _declared_size(scope)
    if size is None or size <= MAX_BODY_BYTES:
        return None
    return _refusal(413, "request_too_large", (
        f"the request body is {size} bytes; this server takes at most {MAX_BODY_BYTES} "
        f"bytes ({MAX_BODY_BYTES // (1024 * 1024)} MiB) in one request: send less at once "
        "(fewer or smaller documents per call)"))


class Screened:
    """An MCP endpoint's POSTs read (at most MAX_BODY_BYTES) and screened before the SDK's
    handler sees them: a body that is not one valid JSON-RPC message is answered here with
    the JSON-RPC error it deserves (mcp/jsonrpc.py), HTTP 400 (413 when too large, whatever
    its content type, declared or chunked). `json_only`: screen only bodies said to be JSON
    (Streamable HTTP refuses the others itself; the SSE transport's message endpoint reads
    any body as JSON)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES,
                 json_only: bool = True) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.json_only = json_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _declared_size(scope) if scope["type"] == "http" else None
        if declared is not None and declared > self.max_bytes:  # refused before it is read
            await _rejected(scope, receive, send, jsonrpc.too_large(self.max_bytes), 413)
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)  # the SDK answers these itself
            return
        body = bytearray()  # any POST's, bounded: a body of another type too (chunked)
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await _rejected(scope, receive, send, jsonrpc.too_large(self.max_bytes), 413)
                return
            if not message.get("more_body", False):
                break
        data = bytes(body)
        if self.json_only and not _json_body(scope):  # the SDK refuses its type itself
            await self.app(scope, _replayed(data, receive), send)
            return
        error = (await anyio.to_thread.run_sync(jsonrpc.screen, data) if len(data) > 65536
                 else jsonrpc.screen(data))
        if error is not None:
            await _rejected(scope, receive, send, error, 400)
            return
        await self.app(scope, _replayed(data, receive), send)


def _replayed(data: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body read already, then what comes after it."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()  # what comes after the body: a disconnect
        replayed = True
        return {"type": "http.request", "body": data, "more_body": False}

    return replay


def _json_body(scope: Scope) -> bool:
    """Whether the request says its body is JSON (as the SDK's transport requires)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"application/json" in value.lower()
    return False


async def _rejected(scope: Scope, receive: Receive, send: Send, error: mcp_types.JSONRPCError,
                    status: int) -> None:
    log.warning("bad_message", transport="http", code=error.error.code,
                reason=error.error.message, id=error.id)
    reply = JSONResponse(error.model_dump(by_alias=True, mode="json", exclude_unset=True),
                         status_code=status)
    await reply(scope, receive, send)


def build_app(server: MCPServer, *, security: TransportSecuritySettings, token: BearerToken,
              health: Callable[[], HealthResult], web: Sequence[BaseRoute] = (),
              logins: Logins | None = None) -> Starlette:
    """The ASGI app over `server`, with the web page's routes `web` (signed in through
    `logins`) when given. Call once per server: the Streamable HTTP session manager it
    creates must then be run around serving (`server.session_manager.run()`)."""
    # The SDK's apps take the same body limit as Screened, so a body is refused once, with
    # JSON, and never by the SDK's own smaller default (4 MiB) in plain text.
    streamable = server.streamable_http_app(streamable_http_path="/mcp",
                                            transport_security=security,
                                            max_request_body_size=MAX_BODY_BYTES + 1)
    sse = server.sse_app(sse_path="/sse", message_path="/messages/",
                         transport_security=security, max_request_body_size=MAX_BODY_BYTES + 1)

    async def tools(request: Request) -> Response:
        listed = await server.list_tools()
        return JSONResponse({"tools": [
            tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in listed]})

    async def live(request: Request) -> Response:
        state = health()
        return JSONResponse(state.model_dump(), status_code=200 if state.alive else 503)

    async def ready(request: Request) -> Response:
        state = health()
        return JSONResponse(state.model_dump(), status_code=200 if state.ready else 503)

    return Starlette(
        routes=[
            Route("/mcp", endpoint=Screened(streamable)),  # an ASGI app: every method
            Route("/sse", endpoint=sse),
            Route("/messages/", endpoint=Screened(sse, json_only=False)),
            Route("/tools", endpoint=tools, methods=["GET"]),
            Route("/health", endpoint=live, methods=["GET"]),
            Route("/health/ready", endpoint=ready, methods=["GET"]),
            *web,
        ],
        middleware=[Middleware(Guard, security=security, token=token, logins=logins)],
    )


class Listener(uvicorn.Server):
    """uvicorn without signal handlers of its own: it would re-raise SIGTERM once stopped
    and end the process before the index is committed and closed. The caller stops it
    with `handle_exit`, which also ends open SSE streams."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def listener(app: Starlette, *, grace_s: int) -> Listener:
    """A uvicorn server for `app`, logging through the standard logging set up by logs.py,
    without access logs (their query strings carry session ids), closing connections that
    are slow to send a request head (HEADER_TIMEOUT_S)."""
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False,
                            log_level="warning", timeout_graceful_shutdown=grace_s,
                            http=SlowHeadersClosed)
    return Listener(config)

