"""What a bridge answers itself while its shared server starts, so that an editor's handshake
never waits for it: `initialize` and `tools/list`, from the manifest of the server's own
definitions (manifest.json beside this module, written by scripts/gen_docs.py from the
server's `initialize` options and `tools/list`; tests/mcp/test_manifest.py compares it byte
for byte with what the server lists). Without the MCP SDK or pydantic.

Only what the server would answer the same is answered here: an `initialize` whose params
are plainly valid, and a `tools/list` of the handshake era without a cursor. Anything else
waits for the server.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pocketmcp import __version__
from pocketmcp.mcp.presented import Presentation
from pocketmcp.mcp.streamable import VERSION_META

MANIFEST = Path(__file__).with_name("manifest.json")


@functools.cache
def manifest() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return found


def initialize(message: dict[str, Any], presentation: Presentation) -> tuple[str, str] | None:
    """(the answer, the version it negotiates) to the client's `initialize` `message`, as
    the server answers it; None when it is not plainly valid (the server answers it)."""
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    info = params.get("clientInfo")
    if not (isinstance(requested, str) and isinstance(params.get("capabilities"), dict)
            and isinstance(info, dict) and isinstance(info.get("name"), str)
            and isinstance(info.get("version"), str)):
        return None
    known = manifest()
    version = requested if requested in known["versions"] else known["latest"]
    result = {"protocolVersion": version, "capabilities": known["capabilities"],
              "serverInfo": {"name": presentation.title, "version": __version__},
              "instructions": presentation.instructions}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), version


def tools_list(message: dict[str, Any], presentation: Presentation) -> str | None:
    """The answer to a `tools/list` of the handshake era (no version in its `_meta`) without
    a cursor; None for any other (the server answers it)."""
    params = message.get("params")
    if params is not None and not (isinstance(params, dict) and set(params) <= {"_meta"}
                                   and isinstance(params.get("_meta", {}), dict)
                                   and VERSION_META not in params.get("_meta", {})):
        return None
    tools = [tool for tool in manifest()["tools"] if tool["name"] in presentation.tools]
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}})
