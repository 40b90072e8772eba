"""`pocketmcp serve`: choose how to serve.

- MCP_TRANSPORT=http (or sse): one process for many clients over HTTP (mcp/host.py).
- stdio, while an HTTP server of the same index runs (its discovery file beside the index
  names it, its process is alive and it takes the token): a bridge that relays the client's
  messages to it, with no model loaded (mcp/bridge.py).
- stdio otherwise: the server itself, for the client that started it (mcp/host.py).

`pocketmcp serve` starts with Python's cyclic garbage collector off (cli.py); `collect_again`
(mcp/collector.py) turns it back on once the server has started.
"""

from __future__ import annotations

from pathlib import Path

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.core.secret import Secret
from pocketmcp.errors import StoreError
from pocketmcp.mcp import discovery
from pocketmcp.mcp.collector import collect_again

log = logs.get("pocketmcp.serve")


async def serve(config: Config, title: str = "pocketmcp", instructions: str | None = None) -> int:
    # host and bridge are imported only when chosen: the host loads the runtime (pipeline,
    # model libraries), which a bridge must not pay for.
    if config.transport != "stdio":
        from pocketmcp.mcp.host import host_http

        collect_again()
        return await host_http(config, title, instructions)
    upstream = await find_upstream(config)
    if upstream is not None:
        from pocketmcp.mcp.bridge import bridge

        collect_again()
        return await bridge(*upstream)
    from pocketmcp.mcp.host import host_stdio

    return await host_stdio(config, title, instructions)


async def find_upstream(config: Config) -> tuple[discovery.Published, Secret] | None:
    """The HTTP server already serving this index, and the token it takes; None when there
    is none to relay to (the reason is logged when one was found but cannot be used)."""
    found = discovery.find(config.sqlite_path)
    if found is None:
        return None
    token = config.token
    if token is None and found.token_file is not None:
        try:
            token = discovery.read_token(Path(found.token_file))
        except StoreError as exc:
            log.warning("not_bridging", url=found.url, reason=str(exc))
            return None
    if token is None:
        log.warning("not_bridging", url=found.url, reason=(
            "that server's token is its POCKETMCP_TOKEN, and POCKETMCP_TOKEN is not set here"))
        return None
    status = await discovery.answers(found.url, "/tools", token.reveal())
    if status == 200:
        return found, token
    reason = ("no answer" if status is None else
              "it refused the token (HTTP 401)" if status == 401 else f"HTTP {status}")
    log.warning("not_bridging", url=found.url, pid=found.pid, reason=reason)
    return None
