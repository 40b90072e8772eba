"""The server's tools called in process through the SDK's in-memory client/server pair, as
a client calls them: arguments validated by the tools' schemas, results rendered and sent
over the protocol. A tool error comes back as an error result: `ToolFailed`, with its code."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, Tool

from pocketmcp.errors import PocketError
from pocketmcp.mcp.server import build_server
from pocketmcp.runtime import Runtime
from support.mcp_harness import code_of

# The message when a tool's arguments do not fit its input schema (mcp/calls.py): coded, each
# field named with its limit, no pydantic text or link.
SCHEMA_REFUSAL = re.compile(r"^(?:Error executing tool \S+: )?INVALID_REQUEST: the arguments "
                            r"of \w+ do not fit its schema: ")


class ToolFailed(Exception):
    """A tool call answered with an error result. `code` is the PocketError code its text
    starts with ("NOT_FOUND: ..."; INVALID_REQUEST for arguments outside the schema), None
    when the SDK refused the call before any tool ran (an unknown tool)."""

    def __init__(self, tool: str, text: str) -> None:
        self.tool = tool
        self.text = text
        self.code = code_of(text)
        super().__init__(text)


@contextmanager
def refused(error: type[PocketError], match: str | None = None
            ) -> Iterator[pytest.ExceptionInfo[ToolFailed]]:
    """The block's tool call fails with `error`'s code, its message matching `match`."""
    with pytest.raises(ToolFailed, match=match) as caught:
        yield caught
    assert caught.value.code == error.code, caught.value.text


@contextmanager
def refused_by_schema(match: str) -> Iterator[pytest.ExceptionInfo[ToolFailed]]:
    """The block's tool call is refused by the tool's input schema, naming `match`, with the
    code INVALID_REQUEST and no pydantic text or link."""
    with pytest.raises(ToolFailed, match=match) as caught:
        yield caught
    text = caught.value.text
    assert caught.value.code == "INVALID_REQUEST" and SCHEMA_REFUSAL.search(text), text
    assert "pydantic" not in text and "validation error" not in text, text


class Tools:
    """The tools of the server over `rt`, called through an in-memory client session: one
    for the block when used as `async with Tools(rt) as tools`, else one per call."""

    def __init__(self, rt: Runtime, server: MCPServer | None = None) -> None:
        self.rt = rt
        self.server: MCPServer = server or build_server(rt)
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None

    async def __aenter__(self) -> Tools:
        async with AsyncExitStack() as stack:
            self._client = await stack.enter_async_context(Client(self.server, mode="legacy"))
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(kind, exc, tb)

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[Client]:
        """The block's client session, else one for this call (the initialize handshake
        first, as a client connecting over stdio or HTTP makes it)."""
        if self._client is not None:
            yield self._client
        else:
            async with Client(self.server, mode="legacy") as client:
                yield client

    async def list_tools(self) -> list[Tool]:
        """The tools the server lists."""
        async with self._session() as client:
            return (await client.list_tools()).tools

    async def result(self, tool: str, **args: Any) -> CallToolResult:
        """The call's result as the client receives it, an error result included."""
        async with self._session() as client:
            return await client.call_tool(tool, args)

    async def __call__(self, tool: str, **args: Any) -> dict[str, Any]:
        """The call's structured result; ToolFailed when it is an error."""
        result = await self.result(tool, **args)
        if result.is_error:
            texts = [c.text for c in result.content if isinstance(c, TextContent)]
            raise ToolFailed(tool, "\n".join(texts))
        assert result.structured_content is not None, result
        return result.structured_content

    async def search(self, query: str, **args: Any) -> list[dict[str, Any]]:
        """The matches of a `search` call."""
        matches: list[dict[str, Any]] = (await self("search", query=query, **args))["matches"]
        return matches

    async def add(self, *docs: tuple[str, str], **args: Any) -> dict[str, int]:
        """upsert_documents of (external_id, text) pairs; their doc_ids by external id."""
        result = await self("upsert_documents", docs=[
            {"text": text, "external_id": ext} for ext, text in docs], **args)
        return {r["external_id"]: r["doc_id"] for r in result["results"]}
