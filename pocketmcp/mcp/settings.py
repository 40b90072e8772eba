"""What serving reads of the settings: the tools offered, the transports and their guards,
sharing one server between editors, and a search's time limit."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from pocketmcp.core.secret import Secret
from pocketmcp.errors import ConfigError
from pocketmcp.settings import Setting

# The MCP tools, and the named sets the TOOLS setting accepts besides single names.
TOOL_NAMES = (
    "search", "get_document", "list_documents", "list_libraries", "status",
    "upsert_documents", "delete_documents", "ingest_file", "ingest_url", "reindex",
    "create_database", "insert_document", "find_similar_documents", "delete_document",
    "links",
)
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "all": TOOL_NAMES,
    "core": ("search", "get_document", "list_documents", "list_libraries", "status"),
}


class ServeSettings(msgspec.Struct, frozen=True, kw_only=True):
    USED_BY: ClassVar = ("serve",)
    tools: Annotated[tuple[str, ...], Setting("TOOLS",
        help="Tools the MCP server offers: `all`, `core` (search, get_document, "
             "list_documents, list_libraries, status), or a comma list of tool names and sets "
             "(e.g. `core,upsert_documents`).")] = ("all",)
    transport: Annotated[Literal["stdio", "http", "sse"], Setting("MCP_TRANSPORT",
        flag="--transport",
        help="How `serve` talks to clients. stdio: to the one client that started it; when "
             "an HTTP server already serves the index it only relays to that one (no model "
             "loaded). http: to many clients at once over HTTP, MCP Streamable HTTP at /mcp "
             "and the older HTTP+SSE transport at /sse. sse: the same as http.")] = "stdio"
    host: Annotated[str, Setting("MCP_HOST", flag="--host",
        help="Address the HTTP server listens on. Anything but a loopback address needs "
             "POCKETMCP_TOKEN.")] = "127.0.0.1"
    port: Annotated[int, Setting("MCP_PORT", flag="--port", minimum=0, maximum=65535,
        help="Port of the HTTP server (0: any free port; the one taken is written to the "
             "index's discovery file).")] = 8765
    token: Annotated[Secret | None, Setting("POCKETMCP_TOKEN",
        used_by=("serve", "search", "open", "doctor"),
        help="Bearer token every HTTP request must carry (all but /health). Unset: one is "
             "generated on first start into the index's token file (SQLITE_PATH.token, mode "
             "0600) and kept. Environment only, never a flag: command lines are visible to "
             "other users.")] = None
    allowed_hosts: Annotated[tuple[str, ...], Setting("MCP_ALLOWED_HOSTS", flag="--allowed-hosts",
        help="Comma-separated Host names the HTTP server answers besides 127.0.0.1, "
             "localhost and [::1] (e.g. a LAN name); `name` allows it on MCP_PORT, "
             "`name:port` as given. Other Hosts get 421 (DNS rebinding). Browser pages at "
             "http:// or https:// of those names may call it too; other Origins get "
             "403.")] = ()
    share: Annotated[Literal["on", "off"], Setting("SHARE",
        help="on: `serve` on stdio (what an editor starts) relays to the HTTP server of the "
             "index, starting one in the background when none runs (its log in "
             "SQLITE_PATH.server.log), so that every editor window shares one model. off: "
             "each stdio process serves on its own.")] = "on"
    server_idle_exit_s: Annotated[int, Setting("SERVER_IDLE_EXIT_S", minimum=0, maximum=10_000_000,
        help="A shared server started by an editor exits once its last client has gone and "
             "this many seconds have passed without one (0: it stays). A server you start "
             "yourself stays.")] = 300
    search_timeout_s: Annotated[float, Setting("SEARCH_TIMEOUT_S", minimum=0.1, maximum=3600,
        used_by=("serve", "search", "check-search"),
        help="A search still running after this many seconds is stopped and answered with "
             "DEADLINE_EXCEEDED; other requests and /health answer meanwhile.")] = 30.0
    # Set by the stdio process that starts a shared server (POCKETMCP_STARTED_BY=editor):
    # such a server exits SERVER_IDLE_EXIT_S after its last client.
    started_by: Literal["user", "editor"] = "user"


def tool_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """TOOLS as tool names in their canonical order: sets expanded, duplicates dropped."""
    wanted: set[str] = set()
    for name in names:
        if name in TOOL_SETS:
            wanted.update(TOOL_SETS[name])
        elif name in TOOL_NAMES:
            wanted.add(name)
        else:
            raise ConfigError("TOOLS", ",".join(names), "`all`, `core` or a comma list of "
                              "tool names: " + ", ".join(TOOL_NAMES))
    if not wanted:
        raise ConfigError("TOOLS", "", "at least one tool name or set (all, core)")
    return tuple(name for name in TOOL_NAMES if name in wanted)
