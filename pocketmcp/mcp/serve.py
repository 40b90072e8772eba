"""`pocketmcp serve`: choose how to serve.

- MCP_TRANSPORT=http (or sse): one process for many clients over HTTP (mcp/host.py).
- stdio with SHARE=on (the default): a bridge that relays the client's messages to the HTTP
  server of the same index (the index's discovery file names it, it answers and takes the
  token), with no model loaded (mcp/bridge.py); such a server is started in the background
  when none runs (mcp/sharing.py), and started again when it has gone by the bridge's next
  request. The client's own tool profile, title and instructions hold through the bridge
  (mcp/presented.py); a server of the index started with another model or folder is a
  SettingsMismatch naming both.
- stdio otherwise (SHARE=off, even while a server runs, or the shared one could not start):
  the server itself, for the client that started it (mcp/host.py).

`pocketmcp serve` starts with Python's cyclic garbage collector off (cli.py); `collect_again`
(mcp/collector.py) turns it back on once the server has started.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable
from pathlib import Path

from pocketmcp import logs
from pocketmcp.config import Config, child_environment
from pocketmcp.core.secret import Secret
from pocketmcp.errors import SettingsMismatch, SharingFailed
from pocketmcp.mcp import discovery
from pocketmcp.mcp.collector import collect_again
from pocketmcp.mcp.presented import Presentation
from pocketmcp.mcp.texts import instructions_for

log = logs.get("pocketmcp.serve")


async def serve(config: Config, title: str = "pocketmcp", instructions: str | None = None) -> int:
    # host and bridge are imported only when chosen: the host loads the runtime (pipeline,
    # model libraries), which a bridge must not pay for.
    if config.serve.transport != "stdio":
        from pocketmcp.mcp.host import host_http

        collect_again()
        return await host_http(config, title, instructions)
    if sys.stdin is not None and sys.stdin.isatty():  # a person, where an editor was expected
        print("pocketmcp: this is the MCP server an editor starts: it reads MCP messages on "  # noqa: T201
              "stdin (Ctrl-D ends it). To index a folder: `pocketmcp index FOLDER`; to "
              "search it: `pocketmcp search \"QUERY\"`; to set up an editor: `pocketmcp "
              "init FOLDER`", file=sys.stderr, flush=True)
    if config.serve.share == "on":  # off: served by this process alone, whatever runs
        def reconnect() -> Awaitable[tuple[discovery.Published, Secret]]:
            return shared_upstream(config, title, instructions)

        try:
            # A server that runs is used at once; none: one is started in the background
            # while the bridge answers the handshake itself.
            upstream = await running_upstream(config)
            if upstream is None:
                from pocketmcp.mcp import sharing

                sharing.check_start_lock(config.main_place())
        except (SharingFailed, OSError) as exc:  # the editor is still served, on its own
            log.warning("not_sharing", reason=str(exc))
        else:
            from pocketmcp.mcp.bridge import bridge

            collect_again()
            tools = config.serve.tools
            return await bridge(upstream, reconnect=reconnect, presentation=Presentation(
                tools=tools, title=title, instructions=instructions or instructions_for(tools)))
    from pocketmcp.mcp.host import host_stdio

    return await host_stdio(config, title, instructions)


async def shared_upstream(config: Config, title: str, instructions: str | None
                          ) -> tuple[discovery.Published, Secret]:
    """The HTTP server of this index, started in the background (detached, exiting once
    idle) when none runs; SharingFailed when none can be started, or when one runs but
    cannot be used (it refuses the token: another would fail to start beside it)."""
    from pocketmcp.mcp import sharing

    place = config.main_place()

    def start() -> subprocess.Popen[bytes]:
        # Every tool: each bridge offers its own client's profile of them (mcp/presented.py).
        env = child_environment(config, MCP_TRANSPORT="http", MCP_HOST="127.0.0.1",
                                MCP_PORT="0", POCKETMCP_STARTED_BY="editor",
                                LOG_LEVEL=config.log_level, TOOLS="all")
        return sharing.spawn(place, sharing.server_command(title, instructions), env,
                             Path.cwd())

    return await sharing.ensure(place, lambda: running_upstream(config), start)


async def running_upstream(config: Config) -> tuple[discovery.Published, Secret] | None:
    """The HTTP server of this index that runs and answers, with the token it takes; None
    when none does. SharingFailed when one runs but cannot be used (it refuses the token:
    another would fail to start beside it), SettingsMismatch when it serves the index with
    another model or folder."""
    from pocketmcp.mcp.upstream import locate

    found = await locate(config.main_place(), config.serve.token)
    if found is None:
        return None
    if found.token is None:
        raise SharingFailed(found.said())
    check_index_settings(config, found.server)
    return found.server, found.token


def check_index_settings(config: Config, server: discovery.Published) -> None:
    """SettingsMismatch when the server of the index was started with another model or
    watches another folder than this process's settings name (a server that publishes
    neither, started by an older version, is not judged)."""
    model, folder = discovery.index_settings(config)
    for name, mine, its in (("EMBED_PROVIDER/EMBED_MODEL", model, server.model),
                            ("WATCH_DIR", folder, server.folder)):
        if mine is not None and its is not None and mine != its:
            raise SettingsMismatch(
                f"{name} is {mine} here, but the shared server of this index (pid {server.pid}, "
                f"{server.url}) was started with {its}: use the same setting in every "
                "editor of this index, or another index (SQLITE_PATH) for this one; stop that "
                "server to start it anew with these settings")
