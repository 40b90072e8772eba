"""The MCP server: every tool and resource registered over one runtime, then cut down to the
tools the TOOLS setting offers."""

from __future__ import annotations

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

from pocketmcp import __version__
from pocketmcp.mcp import tools_index, tools_read, tools_write
from pocketmcp.mcp.texts import instructions_for
from pocketmcp.runtime import Runtime
from pocketmcp.settings import TOOL_NAMES


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
