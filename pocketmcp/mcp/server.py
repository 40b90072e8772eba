"""The MCP server: every tool and resource registered over one runtime, then cut down to the
tools the TOOLS setting offers."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import Tool
from pydantic import ValidationError

from pocketmcp import __version__
from pocketmcp.core.safe import safe_text
from pocketmcp.errors import InvalidRequest
from pocketmcp.mcp import schemas, tools_index, tools_read, tools_write
from pocketmcp.mcp.calllog import error_text
from pocketmcp.mcp.calls import schema_refusal
from pocketmcp.mcp.settings import TOOL_NAMES
from pocketmcp.mcp.texts import instructions_for
from pocketmcp.runtime import Runtime


class PocketServer(MCPServer):
    """The SDK's server, listing each tool with its schemas made small and self-contained
    (mcp/schemas.py)."""

    _published: list[Tool] | None = None
    _schemas: dict[str, dict[str, Any]] = {}  # noqa: RUF012 - replaced whole, with _published

    def add_tool(self, *args: Any, **kwargs: Any) -> None:
        self._published = None
        super().add_tool(*args, **kwargs)

    def remove_tool(self, name: str) -> None:
        self._published = None
        super().remove_tool(name)

    async def list_tools(self) -> list[Tool]:
        """The tools as published, made once for the tools registered (it takes about 4 ms,
        forty times the SDK's own listing)."""
        if self._published is None:
            self._published = schemas.published(await super().list_tools())
            self._schemas = {t.name: t.input_schema for t in self._published}
        return list(self._published)

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        """The SDK's call; arguments its schema refuses (or it has not: a misspelt one would
        be dropped without a word) are a coded tool error naming each field and its limit
        (not pydantic's text and link)."""
        await self.list_tools()  # the schemas, made once
        schema = self._schemas.get(name)
        unknown = sorted(set(arguments or {}) - set(schema.get("properties", {}))) if (
            schema is not None) else []
        if unknown:
            raise ToolError(error_text(InvalidRequest(
                f"the arguments of {name} do not fit its schema: " + "; ".join(
                    f"{safe_text(key[:80])}: not an argument of {name}" for key in unknown))))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError) or isinstance(
                    exc, UnexpectedToolError):
                raise
            raise ToolError(schema_refusal(name, exc.__cause__, self._schemas.get(name, {}))
                            ) from exc.__cause__

    async def sdk_tools(self) -> list[Tool]:
        """The tools as the SDK makes them, their schemas whole (for the docs)."""
        return await super().list_tools()


def build_server(rt: Runtime, *, name: str = "pocketmcp", instructions: str | None = None,
                 token_verifier: TokenVerifier | None = None,
                 auth: AuthSettings | None = None) -> PocketServer:
    """The server over `rt`; over HTTP with the verifier of the bearer token and its auth."""
    mcp = PocketServer(
        name=name, instructions=instructions or instructions_for(rt.config.serve.tools),
        version=__version__, token_verifier=token_verifier, auth=auth)
    tools_read.register(mcp, rt)
    tools_write.register(mcp, rt)
    tools_index.register(mcp, rt)
    for tool in TOOL_NAMES:
        if tool not in rt.config.serve.tools:
            mcp.remove_tool(tool)
    return mcp
