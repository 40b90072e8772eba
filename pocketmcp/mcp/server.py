"""The MCP server: every tool and resource registered over one runtime, then cut down to the
tools the TOOLS setting offers."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from pocketmcp import __version__
from pocketmcp.config import TOOL_NAMES
from pocketmcp.mcp import tools_index, tools_read, tools_write
from pocketmcp.runtime import Runtime

DEFAULT_INSTRUCTIONS = (
    "PocketMCP searches the user's local documents (notes, PDFs, Word files, web pages) by "
    "meaning and keywords. Call `search` with a natural-language query; each match has a "
    "`resource` URI (mcp+doc://DOC#CHUNK) to read the exact passage, and `get_document` "
    "returns a whole document. Documents sit in libraries (`list_libraries`); `search` can be "
    "limited to one. `ingest_file` and `ingest_url` add a file or a web page, "
    "`upsert_documents` adds text; `status` tells whether indexing is done."
)


def build_server(rt: Runtime, *, name: str = "pocketmcp",
                 instructions: str | None = None) -> MCPServer:
    mcp: MCPServer = MCPServer(name=name, instructions=instructions or DEFAULT_INSTRUCTIONS,
                               version=__version__)
    tools_read.register(mcp, rt)
    tools_write.register(mcp, rt)
    tools_index.register(mcp, rt)
    for tool in TOOL_NAMES:
        if tool not in rt.config.tools:
            mcp.remove_tool(tool)
    return mcp
