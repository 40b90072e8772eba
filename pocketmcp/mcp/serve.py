"""`pocketmcp serve`: choose how to serve.

- MCP_TRANSPORT=http (or sse): one process for many clients over HTTP (mcp/host.py).
- stdio, while an HTTP server of the same index runs (the index's discovery file names it,
  its process is alive and it takes the token): a bridge that relays the client's
  messages to it, with no model loaded (mcp/bridge.py). With SHARE=on (the default) such a
  server is started in the background when none runs (mcp/sharing.py), and started again
  when it has gone by the bridge's next request.
- stdio otherwise (SHARE=off and no server, or the shared one could not start): the server
  itself, for the client that started it (mcp/host.py).

`pocketmcp serve` starts with Python's cyclic garbage collector off (cli.py); `collect_again`
(mcp/collector.py) turns it back on once the server has started.
"""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable
from pathlib import Path

from pocketmcp import logs
from pocketmcp.config import Config, child_environment
from pocketmcp.core.secret import Secret
from pocketmcp.errors import SharingFailed
from pocketmcp.mcp import discovery
from pocketmcp.mcp.collector import collect_again

log = logs.get("pocketmcp.serve")


async def serve(config: Config, title: str = "pocketmcp", instructions: str | None = None) -> int:
    # host and bridge are imported only when chosen: the host loads the runtime (pipeline,
    # model libraries), which a bridge must not pay for.
    if config.serve.transport != "stdio":
        from pocketmcp.mcp.host import host_http

        collect_again()
        return await host_http(config, title, instructions)
    reconnect = None
    if config.serve.share == "on":
        def reconnect() -> Awaitable[tuple[discovery.Published, Secret]]:
            return shared_upstream(config, title, instructions)

        try:
            upstream = await reconnect()
        except (SharingFailed, OSError) as exc:  # the editor is still served, on its own
            log.warning("not_sharing", reason=str(exc))
            upstream = None
    else:
        upstream = await find_upstream(config)
    if upstream is not None:
        from pocketmcp.mcp.bridge import bridge

        collect_again()
        return await bridge(*upstream, reconnect=reconnect)
    from pocketmcp.mcp.host import host_stdio

    return await host_stdio(config, title, instructions)


async def shared_upstream(config: Config, title: str, instructions: str | None
                          ) -> tuple[discovery.Published, Secret]:
    """The HTTP server of this index, started in the background (detached, exiting once
    idle) when none runs; SharingFailed when none can be started, or when one runs but
    cannot be used (it refuses the token: another would fail to start beside it)."""
    from pocketmcp.mcp import sharing
    from pocketmcp.mcp.upstream import locate

    place = config.main_place()

    def start() -> subprocess.Popen[bytes]:
        env = child_environment(config, MCP_TRANSPORT="http", MCP_HOST="127.0.0.1",
                                MCP_PORT="0", POCKETMCP_STARTED_BY="editor",
                                LOG_LEVEL=config.log_level)
        return sharing.spawn(place, sharing.server_command(title, instructions), env,
                             Path.cwd())

    async def find() -> tuple[discovery.Published, Secret] | None:
        found = await locate(place, config.serve.token)
        if found is None:
            return None
        if found.token is None:
            raise SharingFailed(found.said())
        return found.server, found.token

    return await sharing.ensure(place, find, start)


async def find_upstream(config: Config) -> tuple[discovery.Published, Secret] | None:
    """The HTTP server already serving this index, and the token it takes; None when there
    is none to relay to (the reason is logged when one was found but cannot be used)."""
    from pocketmcp.mcp.upstream import locate

    found = await locate(config.main_place(), config.serve.token)
    if found is None:
        return None
    if found.token is None:
        reason = "it refused the token (HTTP 401)" if found.status == 401 else found.problem
        log.warning("not_bridging", url=found.server.url, pid=found.server.pid, reason=reason)
        return None
    return found.server, found.token
