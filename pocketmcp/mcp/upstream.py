"""The HTTP server already serving an index, as a bridge, `search`, `open` and `doctor` find
it: one that takes this process's token, or why not, said plainly (a server that runs but
refuses the token is named as such, with what to set)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmcp.core.secret import Secret
from pocketmcp.errors import StoreError
from pocketmcp.mcp import discovery

if TYPE_CHECKING:  # numpy: a bridge names the index's place and loads none of it
    from pocketmcp.store.api import Place


@dataclass(frozen=True)
class Upstream:
    """A server found beside the index: usable (`token` set), or `problem` says why not and
    `fix` what to do."""

    server: discovery.Published
    token: Secret | None
    problem: str | None = None
    fix: str | None = None

    def said(self) -> str:
        """The problem and its fix, as one sentence."""
        return f"{self.problem}: {self.fix}" if self.fix else f"{self.problem}"


async def locate(place: Place, token: Secret | None) -> Upstream | None:
    """The HTTP server serving the index at `place`, with the token it takes (`token`: this
    process's POCKETMCP_TOKEN, else the server's token file); None when none runs (none
    published, its process gone, or it does not answer)."""
    found = discovery.find(place)
    if found is None:
        return None
    mine = token
    if token is None and found.token_file is not None:
        try:
            token = discovery.read_token(Path(found.token_file))
        except StoreError as exc:
            return Upstream(found, None, f"the HTTP server at {found.url} (pid {found.pid}) "
                                         f"serves this index, but its token is unreadable "
                                         f"here: {exc}", "check that file's permissions")
    where = f"the HTTP server at {found.url} (pid {found.pid})"
    if token is None:
        # That server took its token from its own POCKETMCP_TOKEN: this shell has none.
        if await discovery.answers(found.url) is None:
            return None
        return Upstream(
            found, None, f"{where} serves this index, but it takes the token set in its "
                         "POCKETMCP_TOKEN and POCKETMCP_TOKEN is not set here",
            "set POCKETMCP_TOKEN to that server's token (export POCKETMCP_TOKEN=...) and run "
            "this again")
    status = await discovery.answers(found.url, "/tools", token.reveal())
    if status is None:
        return None
    if status == 200:
        return Upstream(found, token)
    if status == 401:
        refused = "the POCKETMCP_TOKEN set here" if mine is not None else (
            f"the token in {found.token_file}")
        fix = ("set POCKETMCP_TOKEN here to the server's token (the one it was started with)"
               if found.token_file is None else
               f"unset POCKETMCP_TOKEN here (the server's token is in {found.token_file}), "
               "or set it to the token the server was started with"
               if mine is not None else
               "set POCKETMCP_TOKEN here to the token the server was started with")
        return Upstream(found, None, f"{where} runs but refused {refused} (HTTP 401)", fix)
    return Upstream(found, None, f"{where} answered HTTP {status}")
