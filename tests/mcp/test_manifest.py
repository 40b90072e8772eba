"""The manifest a bridge answers `initialize` and `tools/list` from while its shared server
starts (mcp/early.py) is the server's own definitions: made from the server by
scripts/gen_docs.py, and the same, byte for byte, as what the server lists now."""

from __future__ import annotations

import json
import os

from pocketmcp.config import load
from pocketmcp.mcp import early, reference
from pocketmcp.mcp.server import build_server
from pocketmcp.plans import serving
from pocketmcp.runtime import Runtime


async def test_the_manifest_is_what_the_server_lists_byte_for_byte() -> None:
    config = load({}, environ={"TOOLS": "all", "SQLITE_PATH": os.devnull})
    server = build_server(Runtime(config, serving(False)))  # listing needs no index
    made = await reference.manifest(server)
    assert early.MANIFEST.read_text() == json.dumps(made, indent=1) + "\n", (
        "the manifest is out of date: run scripts/gen_docs.py")
    shipped = early.manifest()
    assert json.dumps(shipped["tools"]) == json.dumps(await reference.listing(server))
    assert [t["name"] for t in shipped["tools"]] == [
        t.name for t in await server.list_tools()]
