"""`pocketmcp serve`: the runtime and the MCP server on stdio, until the client goes away or a
signal comes; then the work in flight is committed (within DRAIN_S) and the locks released."""

from __future__ import annotations

import signal
import time

import anyio

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.mcp.server import build_server
from pocketmcp.mcp.stdio import serve_stdio
from pocketmcp.runtime import open_runtime, serving

# Time allowed to drain work in flight once the client has gone or SIGTERM arrived.
DRAIN_S = 3.5


async def serve(config: Config, title: str = "pocketmcp", instructions: str | None = None) -> int:
    log = logs.get("pocketmcp.serve")
    started = time.perf_counter()
    watch = config.watch_dir_given or config.watch_dir.is_dir()
    log.info("serving", transport="stdio", index=str(config.sqlite_path),
             watch_dir=str(config.watch_dir) if watch else None, title=title)
    reason = "stdin closed"
    try:
        async with open_runtime(config, serving(watch), on_event=logs.events("pocketmcp.index"),
                                drain_s=DRAIN_S) as runtime:
            server = build_server(runtime, name=title, instructions=instructions)
            async with anyio.create_task_group() as front:

                async def on_signal() -> None:
                    nonlocal reason
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for signum in signals:
                            reason = signal.Signals(signum).name
                            front.cancel_scope.cancel()
                            return

                front.start_soon(on_signal, name="pocketmcp.signals")
                await serve_stdio(server)
                front.cancel_scope.cancel()
            log.info("stopping", reason=reason)
    finally:
        log.info("stopped", seconds=round(time.perf_counter() - started, 3))
    return 0
