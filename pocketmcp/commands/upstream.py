"""The HTTP server of this index, as `search` and `open` find it: one that takes this
process's token, or why not, said plainly (a server that runs but refuses the token is named
as such, with what to set)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pocketmcp.config import Config
from pocketmcp.core.secret import Secret
from pocketmcp.errors import StoreError
from pocketmcp.mcp import discovery


@dataclass(frozen=True)
class Upstream:
    """A server found beside the index: usable (`token` set), or `problem` says why not."""

    server: discovery.Published
    token: Secret | None
    problem: str | None = None


async def locate(config: Config) -> Upstream | None:
    """The HTTP server serving this index, with the token it takes; None when none runs
    (none published, its process gone, or it does not answer)."""
    found = discovery.find(config.sqlite_path)
    if found is None:
        return None
    token = config.token
    if token is None and found.token_file is not None:
        try:
            token = discovery.read_token(Path(found.token_file))
        except StoreError as exc:
            return Upstream(found, None, f"the HTTP server at {found.url} (pid {found.pid}) "
                                         f"serves this index, but its token is unreadable "
                                         f"here: {exc}")
    if token is None:
        # That server took its token from its own POCKETMCP_TOKEN: this shell has none.
        if await discovery.answers(found.url) is None:
            return None
        return Upstream(found, None, (
            f"the HTTP server at {found.url} (pid {found.pid}) serves this index, but it takes "
            "the token set in its POCKETMCP_TOKEN and POCKETMCP_TOKEN is not set here: set "
            "POCKETMCP_TOKEN to that server's token (export POCKETMCP_TOKEN=...) and run "
            "this again"))
    status = await discovery.answers(found.url, "/tools", token.reveal())
    if status is None:
        return None
    if status == 200:
        return Upstream(found, token)
    if status == 401:
        mine = "the POCKETMCP_TOKEN set here" if config.token is not None else (
            f"the token in {found.token_file}")
        fix = ("set POCKETMCP_TOKEN here to the server's token (the one it was started with)"
               if found.token_file is None else
               f"unset POCKETMCP_TOKEN here (the server's token is in {found.token_file}), "
               "or set it to the token the server was started with"
               if config.token is not None else
               "set POCKETMCP_TOKEN here to the token the server was started with")
        return Upstream(found, None, (
            f"the HTTP server at {found.url} (pid {found.pid}) runs but refused {mine} "
            f"(HTTP 401): {fix}"))
    return Upstream(found, None, f"the HTTP server at {found.url} (pid {found.pid}) answered "
                                 f"HTTP {status}")
