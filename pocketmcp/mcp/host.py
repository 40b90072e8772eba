"""One runtime served to MCP clients until a signal comes: on stdio to the client that started
the process, or over HTTP to many at once. Either way there is one model, one in-memory
vector index and one writer per index file; on the way out the work in flight is committed
(within DRAIN_S) and the locks released."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from pocketmcp import __version__, logs
from pocketmcp.config import Config
from pocketmcp.core.secret import Secret
from pocketmcp.errors import AlreadyServing, ListenFailed, PocketError
from pocketmcp.mcp import discovery
from pocketmcp.mcp.collector import collect_again
from pocketmcp.mcp.lines import stdin_lines, stdout_lines
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime, on_signals, open_runtime

# The MCP SDK, the tools and the HTTP server's modules take about a second to import (the
# SDK's protocol types alone most of it). They are imported when used: on stdio in a worker
# thread while the runtime starts (host_stdio); the HTTP modules (mcp/http.py, and
# mcp/attached.py that names its paths) only by host_http.
if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from pocketmcp.ops.status_results import HealthResult
    from pocketmcp.store.api import Place
    from pocketmcp.web.auth import Logins

# Time allowed to drain work in flight once the client has gone or SIGTERM arrived.
DRAIN_S = 3.5
# Over HTTP: how long requests in flight may still finish after SIGTERM, then the drain; the
# two (with the SDK's sessions closing in between) stay within 5 s.
GRACE_S = 1
HTTP_DRAIN_S = 2.0
# The longest the garbage collector stays off while the runtime starts (mcp/collector.py).
COLLECT_AFTER_S = 10.0

log = logs.get("pocketmcp.serve")


def _watching(config: Config) -> bool:
    return config.watched.given or config.watched.root.is_dir()


async def host_stdio(config: Config, title: str, instructions: str | None) -> int:
    """Serve the client on stdin/stdout until it closes stdin or a signal comes."""
    started = time.perf_counter()
    watch = _watching(config)
    log.info("serving", transport="stdio", index=config.main_place().describe(),
             watch_dir=str(config.watched.root) if watch else None, title=title)
    reason = "stdin closed"
    # Set once the SDK's session takes the client's lines. The main index's writer (indexing,
    # the vector file's check) waits for it: until then it would only slow the import down.
    session_up = anyio.Event()
    try:
        # The protocol stream is taken first: whatever the start-up prints goes to stderr.
        lines = stdin_lines()
        async with (
            lines,
            stdout_lines() as out,
            open_runtime(config, serving(watch), on_event=logs.events("pocketmcp.index"),
                         drain_s=DRAIN_S, hold=session_up) as runtime,
            anyio.create_task_group() as tasks,
        ):

            def stop(name: str) -> None:
                nonlocal reason
                reason = name
                tasks.cancel_scope.cancel()

            tasks.start_soon(on_signals, stop, name="pocketmcp.signals")
            tasks.start_soon(_collect_once_started, runtime, session_up,
                             name="pocketmcp.collect")
            # The model loads and the index opens in the background from here, while the
            # SDK and the tools are imported in a worker thread (the client's first lines
            # wait in the pipe meanwhile).
            server, serve_session = await anyio.to_thread.run_sync(
                _stdio_server, runtime, title, instructions)
            log.debug("session_up", seconds=round(time.perf_counter() - started, 3))
            await serve_session(server, lines, out, serving=session_up)
            tasks.cancel_scope.cancel()
        log.info("stopping", reason=reason)
    finally:
        log.info("stopped", seconds=round(time.perf_counter() - started, 3))
    return 0


async def _collect_once_started(runtime: Runtime, session_up: anyio.Event) -> None:
    """The garbage collector back on once the SDK's session is up and the runtime ready (or
    its start failed, or COLLECT_AFTER_S passed)."""
    with anyio.move_on_after(COLLECT_AFTER_S):
        await session_up.wait()
        with suppress(PocketError):
            await runtime.started()
    collect_again()


def _stdio_server(runtime: Runtime, title: str, instructions: str | None
                  ) -> tuple[MCPServer, Callable[..., Awaitable[None]]]:
    """The server over `runtime` and the stdio session that runs it (imports them:
    blocking, most of a second)."""
    from pocketmcp.mcp.server import build_server  # heavy: the MCP SDK and the tools
    from pocketmcp.mcp.stdio import serve

    return build_server(runtime, name=title, instructions=instructions), serve


async def host_http(config: Config, title: str, instructions: str | None) -> int:
    """Serve every client that comes over HTTP until SIGTERM or SIGINT."""
    from pocketmcp.mcp import http  # heavy: the HTTP server, the MCP SDK, the web page
    from pocketmcp.mcp.attached import Attached, exit_when_idle  # imports mcp/http.py
    from pocketmcp.mcp.server import build_server
    from pocketmcp.web.auth import Logins
    from pocketmcp.web.routes import routes as web_routes

    started = time.perf_counter()
    place = config.main_place()
    token, token_path = _token(config, place)
    http.check_token(token.reveal(), config.serve.host)  # a short token only on loopback
    running = discovery.find(place)
    if running is not None and await discovery.answers(running.url) is not None:
        whose = "a PocketMCP HTTP server"
        if running.started_by == "editor":
            after = config.serve.server_idle_exit_s
            whose = ("the server an editor started, which every editor of this index shares "
                     + (f"(it exits when no client has used it for SERVER_IDLE_EXIT_S, {after} "
                        "s by these settings)," if after else "(SERVER_IDLE_EXIT_S=0 here: it "
                        "may not exit by itself),"))
        raise AlreadyServing(
            f"{whose} pid {running.pid}, already serves {place.describe()} at {running.url}: "
            f"connect to it, stop it first (kill {running.pid}), or serve another index "
            "(--db, or PG_SCHEMA for Postgres)")
    sock = _listen(config.serve.host, config.serve.port)
    port = sock.getsockname()[1]
    url = f"http://{http.url_host(_reachable(config.serve.host))}:{port}"
    watch = _watching(config)
    log.info("serving", transport="http", url=url, mcp=url + "/mcp", sse=url + "/sse",
             index=place.describe(), watch_dir=str(config.watched.root) if watch else None,
             token_file=str(token_path) if token_path else None, title=title)
    reason = "stopped"
    published = False
    try:
        async with open_runtime(config, serving(watch), on_event=logs.events("pocketmcp.index"),
                                drain_s=HTTP_DRAIN_S, place=place) as runtime:
            verifier = http.BearerToken(token.reveal())
            server = build_server(runtime, name=title, instructions=instructions,
                                  token_verifier=verifier, auth=http.auth_settings(url))
            logins = Logins(token.reveal())
            app = http.build_app(
                server, token=verifier, health=lambda: _health(runtime),
                security=http.allowed(port, bound=config.serve.host,
                                      hosts=config.serve.allowed_hosts),
                web=web_routes(runtime, logins), logins=logins)
            _announce_page(url, logins)
            attached = Attached(app)
            runtime.readiness.serving = "shared"
            runtime.readiness.clients = lambda: attached.streams
            listener = http.listener(attached, grace_s=GRACE_S)  # type: ignore[arg-type]
            model, folder = discovery.index_settings(config)
            itself = discovery.Published(
                url=url, pid=os.getpid(), index=place.describe(),
                token_file=str(token_path.resolve()) if token_path else None,
                version=__version__, started_by=config.serve.started_by, model=model,
                folder=folder)
            discovery.publish(place, itself)
            published = True
            async with anyio.create_task_group() as signals:
                signals.start_soon(discovery.keep_published, place, itself,
                                   name="pocketmcp.published")

                def stop(name: str) -> None:
                    nonlocal reason
                    reason = name
                    listener.handle_exit(getattr(signal, name), None)

                signals.start_soon(on_signals, stop, name="pocketmcp.signals")
                if config.serve.started_by == "editor" and config.serve.server_idle_exit_s:

                    def idle() -> None:
                        nonlocal reason
                        reason = "idle"
                        listener.handle_exit(signal.SIGTERM, None)

                    signals.start_soon(exit_when_idle, attached,
                                       config.serve.server_idle_exit_s, idle, name="pocketmcp.idle")
                async with server.session_manager.run():
                    await listener.serve(sockets=[sock])
                log.info("stopping", reason=reason)
                signals.cancel_scope.cancel()
    finally:
        if published:
            discovery.withdraw(place, os.getpid())
        sock.close()
        log.info("stopped", seconds=round(time.perf_counter() - started, 3))
    return 0


def _announce_page(url: str, logins: Logins) -> None:
    """The web page's one-time login link, to a terminal only (never to a log file)."""
    from pocketmcp.web.auth import CODE_TTL_S  # imported with the HTTP server's modules

    if sys.stderr.isatty():
        print(f"pocketmcp: the web page (one-time login link, good for "  # noqa: T201
              f"{CODE_TTL_S / 60:.0f} minutes):\n  {url}/login?code={logins.issue()}",
              file=sys.stderr, flush=True)


def _health(runtime: Runtime) -> HealthResult:
    return runtime.health()


def _token(config: Config, place: Place) -> tuple[Secret, Path | None]:
    """POCKETMCP_TOKEN, else the index's own token (made, and announced, on first start: in
    full only to a terminal, so it never lands in a log file)."""
    if config.serve.token is not None:
        return config.serve.token, None
    token, path, created = discovery.ensure_token(place)
    if created:
        shown = f":\n  {token.reveal()}\n" if sys.stderr.isatty() else " (read it from that file)"
        print(f"pocketmcp: made the access token for HTTP clients in {path} "  # noqa: T201
              f"(mode 0600); clients send it as 'Authorization: Bearer <token>'{shown}",
              file=sys.stderr, flush=True)
    return token, path


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family, backlog=128)
    except OSError as exc:
        raise ListenFailed(f"cannot listen on {host}:{port}: {exc.strerror or exc}; set "
                           "MCP_PORT (or --port) to a free port, 0 for any") from exc


def _reachable(host: str) -> str:
    """The address local clients reach a server bound to `host` at."""
    from pocketmcp.mcp import http  # imported with the HTTP server's modules

    if http.ipaddress_is_wildcard(host):
        return "::1" if ":" in host else "127.0.0.1"
    return host
