"""What each client chooses for itself holds through the bridge, whoever started the shared
server: its tool profile (TOOLS), its title and instructions (--title, --inst). The shared
server offers every tool (a server an editor starts is started with TOOLS=all); the bridge
shows its client the server's answers as a process serving alone with the client's own
settings would give them: the name and instructions it announces, the tools it lists, and a
call of a tool outside the client's profile refused as an unknown tool. Without the MCP SDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"  # the 2026-era stamp on each result
ANNOUNCING = frozenset({"initialize", "server/discover"})  # results that carry instructions


@dataclass(frozen=True)
class Presentation:
    """A client's own settings, as a process serving it alone would present them."""

    tools: tuple[str, ...]
    title: str
    instructions: str


def refused_call(request_id: str | int, message: dict[str, Any],
                 presentation: Presentation) -> str | None:
    """The answer to a `tools/call` of a tool outside the client's profile (what a process
    serving alone answers: an unknown tool), or None for one the client may call."""
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if not isinstance(name, str) or name in presentation.tools:
        return None
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
        "content": [{"type": "text", "text": f"Unknown tool: {name}"}], "isError": True}})


def present(result: dict[str, Any], method: str | None, presentation: Presentation) -> bool:
    """Rewrite the server's `result` of a request of `method` as the client's own settings
    present it; whether anything changed."""
    changed = _named(result.get("serverInfo"), presentation.title)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        changed = _named(meta.get(SERVER_INFO_META), presentation.title) or changed
    if method in ANNOUNCING and result.get("instructions") != presentation.instructions:
        result["instructions"] = presentation.instructions
        changed = True
    tools = result.get("tools")
    if method == "tools/list" and isinstance(tools, list):
        offered = [t for t in tools if isinstance(t, dict) and t.get("name") in
                   presentation.tools]
        if len(offered) != len(tools):
            result["tools"] = offered
            changed = True
    return changed


def _named(info: Any, title: str) -> bool:
    if not isinstance(info, dict) or info.get("name") == title:
        return False
    info["name"] = title
    return True
