"""Tools about the index as a whole: reindex and status."""

from __future__ import annotations

from typing import Annotated

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from pocketmcp.core.argdoc import doc
from pocketmcp.mcp.calls import READ_ONLY, WRITES, render, tool_call
from pocketmcp.ops import index, selfcheck
from pocketmcp.ops.results import ReindexResult
from pocketmcp.ops.status_results import StatusResult
from pocketmcp.runtime import Runtime
from pocketmcp.search import tuning


def register(mcp: MCPServer, rt: Runtime) -> None:

    @mcp.tool(name="reindex", title="Rescan the watched folder", annotations=WRITES)
    async def reindex_tool(
        ctx: Context,
        force: Annotated[bool, Field(description="Also re-embed unchanged files.")] = False,
        path_glob: Annotated[str | None, Field(json_schema_extra=doc(
            "Only files whose path matches this glob."))] = None,
    ) -> ReindexResult:
        """Rescan the watched folder and update the index."""
        async with tool_call("reindex", force=force) as counts:
            pipeline = await rt.rescanner()
            result = await index.reindex(pipeline, await rt.read_index(), force=force,
                                         path_glob=path_glob, progress=ctx.report_progress)
            counts.update(result.model_dump())
            return result

    @mcp.tool(name="status", title="Index status", annotations=READ_ONLY)
    async def status_tool(
        check_search: Annotated[bool, Field(
            description="Also measure search on questions made from the titles and "
                        "headings (seconds).")] = False,
    ) -> StatusResult:
        """Documents, chunks, model and indexing progress."""
        async with tool_call("status", check_search=check_search):
            report = await rt.status_report()
            if check_search:
                reading = await rt.reading()
                found = await selfcheck.check(reading, params=tuning.params_of(reading.index))
                report = report.model_copy(update={"search_check": msgspec.to_builtins(found)})
            return render(report)
