"""The MCP server: every tool and resource registered over one runtime, then cut down to the
tools the TOOLS setting offers."""

from __future__ import annotations

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

from pocketmcp import __version__
from pocketmcp.mcp import tools_index, tools_read, tools_write
from pocketmcp.runtime import Runtime
from pocketmcp.settings import TOOL_NAMES


def instructions_for(tools: tuple[str, ...]) -> str:
    """What the client's model is told about the tools this server offers."""
    text = ("PocketMCP searches the user's local documents (notes, PDFs, Word files, web pages) "
            "by meaning and keywords. Call `search` with a natural-language query; each match "
            "has a `resource` URI (mcp+doc://DOC#CHUNK) to read the exact passage")
    text += ", and `get_document` returns a whole document." if "get_document" in tools else "."
    if "list_libraries" in tools:
        text += (" Documents sit in libraries (`list_libraries`); `search` can be limited to "
                 "one.")
    adders = [f"`{t}`" for t in ("ingest_file", "ingest_url", "upsert_documents") if t in tools]
    if adders:
        text += f" {', '.join(adders)} add files, web pages or text."
    text += (" Filters take tags, dates (`modified_after: \"7d\"`) and metadata; each result "
             "has `modified_at`, `tags`, and `stale` (true: the file changed since it was "
             "indexed).")
    if "links" in tools:
        text += " `links` lists the notes a document links to and those linking to it."
    if "status" in tools:
        text += " `status` tells whether indexing is done."
    return text


def build_server(rt: Runtime, *, name: str = "pocketmcp", instructions: str | None = None,
                 token_verifier: TokenVerifier | None = None,
                 auth: AuthSettings | None = None) -> MCPServer:
    """The server over `rt`; over HTTP with the verifier of the bearer token and its auth."""
    mcp: MCPServer = MCPServer(
        name=name, instructions=instructions or instructions_for(rt.config.tools),
        version=__version__, token_verifier=token_verifier, auth=auth)
    tools_read.register(mcp, rt)
    tools_write.register(mcp, rt)
    tools_index.register(mcp, rt)
    for tool in TOOL_NAMES:
        if tool not in rt.config.tools:
            mcp.remove_tool(tool)
    return mcp
