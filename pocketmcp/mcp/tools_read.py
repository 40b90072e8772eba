"""Tools and resources that read: search, find_similar_documents, get_document,
list_documents, list_libraries, and the document and chunk resources."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from pydantic import Field, WithJsonSchema

from pocketmcp.core.argdoc import doc
from pocketmcp.core.safe import safe
from pocketmcp.errors import NotFound
from pocketmcp.mcp import searching
from pocketmcp.mcp.calls import DB_NAME, READ_ONLY, DocId, logged, render, tool_call
from pocketmcp.ops import documents, links
from pocketmcp.ops.results import Document, DocumentList, LibraryList, LinksResult, Page
from pocketmcp.runtime import Runtime
from pocketmcp.search import run as search
from pocketmcp.search.results import FindSimilarResult, SearchFilter, SearchResult


def register(mcp: MCPServer, rt: Runtime) -> None:
    config = rt.config

    @mcp.tool(name="search", title="Search documents", annotations=READ_ONLY)
    async def search_tool(
        query: searching.Query,
        top_k: searching.TopK = 8,
        library: searching.Library = None,
        filter: SearchFilter | None = None,
        score_threshold: searching.Threshold = search.SCORE_THRESHOLD,
        mode: searching.Mode = "hybrid",
        unique_docs: searching.UniqueDocs = False,
        max_per_doc: searching.MaxPerDoc = search.MAX_PER_DOC,
        context: searching.Context = 0,
        strict_threshold: searching.Strict = False,
    ) -> SearchResult:
        """Passages relevant to a query, best first. A match's `resource` reads its exact
        text; `stale`: the file changed since it was indexed."""
        # The parameters are searching.SearchArgs', validated by the SDK already.
        args = searching.SearchArgs.model_construct(
            query=query, top_k=top_k, library=library, filter=filter,
            score_threshold=score_threshold, mode=mode, unique_docs=unique_docs,
            max_per_doc=max_per_doc, context=context, strict_threshold=strict_threshold)
        async with tool_call("search", top_k=top_k, mode=mode) as counts:
            return render(await searching.run(rt.reading, args, counts))

    @mcp.tool(name="find_similar_documents", title="Find similar documents",
              annotations=READ_ONLY)
    async def find_tool(
        text: Annotated[str, Field(json_schema_extra=doc(
            "Text to find passages similar in meaning to."))],
        top_k: Annotated[int, Field(ge=1, le=search.MAX_SIMILAR)] = 10,
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> FindSimilarResult:
        """Chunks closest in meaning to `text` (cosine similarity), best first."""
        async with tool_call("find_similar_documents", db=logged(db_name),
                             top_k=top_k) as counts:
            result = await search.find_similar(lambda: rt.reading(db_name), text, top_k,
                                               max_bytes=config.pipeline.max_file_bytes)
            counts["results"] = len(result.results)
            return render(result)

    @mcp.tool(name="list_documents", title="List documents", annotations=READ_ONLY)
    async def list_tool(
        page: Page | None = None,
        library: searching.Library = None,
        metadata: Annotated[dict[str, str | int | float | bool] | None, WithJsonSchema(
            {"type": "object", "description": "Top-level values to match.", **doc(
                "Only documents with all of them.")})] = None,
        filter: SearchFilter | None = None,
        sort: Annotated[Literal["doc_id", "modified"], Field(
            description="modified: last changed first.",
            json_schema_extra=doc("doc_id: oldest first."))] = "doc_id",
    ) -> DocumentList:
        """Indexed documents, a page at a time."""
        page = page or Page(limit=50, cursor=None)
        async with tool_call("list_documents", limit=page.limit, library=library,
                             sort=sort) as counts:
            result = await documents.list_documents(
                rt.read_index, page.limit, page.cursor, library=library, metadata=metadata,
                flt=filter, sort=sort)
            counts["documents"] = len(result.documents)
            return render(result)

    @mcp.tool(name="links", title="Links of a document", annotations=READ_ONLY)
    async def links_tool(doc_id: DocId) -> LinksResult:
        """Notes a document links to (wiki and Markdown links) and notes linking to it."""
        async with tool_call("links", doc_id=doc_id) as counts:
            result = await links.links(await rt.read_index(), doc_id)
            counts.update(outgoing=len(result.outgoing), incoming=len(result.incoming))
            return render(result)

    @mcp.tool(name="get_document", title="Get a document", annotations=READ_ONLY)
    async def get_tool(
        doc_id: DocId,
        chunk_id: Annotated[int | None, Field(description="A match's chunk_id: read it in place.",
                                              json_schema_extra=doc(PASSAGE))] = None,
        max_tokens: Annotated[int, Field(
            ge=1, le=documents.MAX_PASSAGE_TOKENS, json_schema_extra=doc(
                "With chunk_id: the passage's model tokens at most (the chunk alone when it "
                "holds more); without it, the whole text is given."))] = documents.PASSAGE_TOKENS,
    ) -> Document:
        """One document's whole text and metadata."""
        async with tool_call("get_document", doc_id=doc_id, chunk_id=chunk_id) as counts:
            result = await documents.get_document(await rt.read_index(), doc_id, chunk_id,
                                                  max_tokens)
            counts["chars"] = len(result.text)
            return render(result)

    @mcp.tool(name="list_libraries", title="List libraries", annotations=READ_ONLY)
    async def list_libraries_tool() -> LibraryList:
        """Libraries (named collections) with document and chunk counts."""
        async with tool_call("list_libraries") as counts:
            result = await documents.libraries(await rt.read_index(),
                                               config.watched.default_library)
            counts["libraries"] = len(result.libraries)
            return render(result)

    @mcp.resource("mcp+doc://{doc_id}", name="document", mime_type="application/json",
                  description="A whole document: text and metadata.")
    async def document_resource(doc_id: str) -> str:
        async with tool_call("resource_document", doc_id=doc_id):
            try:
                row = await documents.get_document(await rt.read_index(), _int(doc_id))
            except NotFound as exc:
                raise ResourceNotFoundError(str(exc)) from exc
            return _json(row.model_dump())

    @mcp.resource("mcp+doc://{doc_id}#{chunk_id}", name="chunk", mime_type="application/json",
                  description="One chunk: its exact text and offsets in the document.")
    async def chunk_resource(doc_id: str, chunk_id: str) -> str:
        async with tool_call("resource_chunk", doc_id=doc_id, chunk_id=chunk_id):
            try:
                row = await documents.get_chunk(await rt.read_index(), _int(doc_id),
                                                _int(chunk_id))
            except NotFound as exc:
                raise ResourceNotFoundError(str(exc)) from exc
            return _json(row.model_dump())


PASSAGE = ("The text is then that chunk with its neighbours, as many as max_tokens holds, "
           "and `passage` says where it lies (offsets, lines, pages).")


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ResourceNotFoundError(f"{text!r} is not a numeric id") from None
    if value < 1:
        raise ResourceNotFoundError(f"{text!r} is not a valid id")
    return value


def _json(row: dict[str, Any]) -> str:
    return json.dumps(safe(row), ensure_ascii=False)
