"""`pocketmcp open`: a one-time login link to the web page of the HTTP server already
serving this index (it is found through the index's discovery file, and asked with the
token, as a bridge would)."""

from __future__ import annotations

import argparse

import anyio
import httpx2

from pocketmcp.commands.choosing import no_index
from pocketmcp.config import Config
from pocketmcp.errors import PocketError
from pocketmcp.mcp.upstream import locate


async def login_link(config: Config, args: argparse.Namespace) -> int:
    place = config.main_place()
    if not await anyio.to_thread.run_sync(place.exists):  # the indexes there are, named
        raise no_index(config, args.indexes_seen)
    found = await locate(place, config.serve.token)
    if found is None:
        raise PocketError(
            f"no HTTP server serves {place.describe()}: start one with `pocketmcp serve "
            "--transport http` (on the same folder or SQLITE_PATH), then run this again")
    if found.token is None:
        raise PocketError(found.said())
    server, token = found.server, found.token
    try:
        async with httpx2.AsyncClient(timeout=5, trust_env=False) as client:
            response = await client.post(server.url + "/login/link",
                                         headers={"Authorization": f"Bearer {token.reveal()}"})
    except httpx2.HTTPError as exc:
        raise PocketError(f"the server at {server.url} did not answer: {exc}") from exc
    if response.status_code != 200:
        raise PocketError(f"the server at {server.url} gave no login link (HTTP "
                          f"{response.status_code}); it may be a version without the page")
    print(response.json()["url"])  # noqa: T201
    return 0
