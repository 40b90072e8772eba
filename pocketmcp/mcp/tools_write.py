"""Tools that write: upsert_documents and insert_document (one operation), delete_documents
and delete_document (one operation), ingest_file, ingest_url and create_database. Each
returns after the index's writer has committed."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from pocketmcp.core.argdoc import doc
from pocketmcp.errors import NotFound
from pocketmcp.mcp.calls import (
    DB_NAME,
    DELETES,
    FETCHES,
    WRITES,
    DocId,
    logged,
    progress_of,
    render,
    tool_call,
)
from pocketmcp.ops import documents, ingest
from pocketmcp.ops.results import (
    CreateDatabaseResult,
    DeleteDocumentResult,
    DeleteResult,
    IngestResult,
    InsertDocumentResult,
    NewDocument,
    UpsertResult,
)
from pocketmcp.runtime import Runtime

# The metadata an ingest tool stores with its document.
Metadata = Annotated[dict[str, Any] | None, Field(json_schema_extra=doc(
    "Your fields, returned with it and usable as search filters."))]


def register(mcp: MCPServer, rt: Runtime) -> None:
    config = rt.config

    @mcp.tool(name="upsert_documents", title="Add or update documents", annotations=WRITES)
    async def upsert_tool(
        ctx: Context,
        docs: Annotated[list[NewDocument], Field(
            min_length=1, max_length=documents.MAX_DOCS_PER_CALL,
            description="New ones, or updates by external_id.")],
    ) -> UpsertResult:
        """Index given texts; searchable when this returns."""
        async with tool_call("upsert_documents", docs=len(docs)) as counts:
            result = await documents.upsert(rt.writing, docs,
                                            max_bytes=config.pipeline.max_file_bytes,
                                            progress=progress_of(ctx))
            counts["chunks"] = sum(r.chunks for r in result.results)
            return render(result)

    @mcp.tool(name="insert_document", title="Insert a document", annotations=WRITES)
    async def insert_tool(
        ctx: Context,
        text: str,
        metadata: dict[str, Any] | None = None,
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> InsertDocumentResult:
        """Index one text; searchable when this returns. The same text again updates its
        metadata."""
        async with tool_call("insert_document", db=logged(db_name)) as counts:
            doc = NewDocument.model_construct(text=text, metadata=metadata, external_id=None,
                                              title=None)  # checked by the operation itself
            result = await documents.upsert(lambda: rt.writing(db_name), [doc],
                                            max_bytes=config.pipeline.max_file_bytes,
                                            progress=progress_of(ctx))
            item = result.results[0]
            counts["chunks"] = item.chunks
            return InsertDocumentResult(doc_id=item.doc_id, chunk_count=item.chunks)

    @mcp.tool(name="delete_documents", title="Delete documents", annotations=DELETES)
    async def delete_tool(
        doc_ids: list[int] | None = None, external_ids: list[str] | None = None,
    ) -> DeleteResult:
        """Remove documents. A watched file comes back when it changes or at the next
        start: delete the file to remove it for good."""
        async with tool_call("delete_documents") as counts:
            result = await documents.delete(rt.writing, doc_ids, external_ids)
            counts["deleted"] = len(result.deleted_doc_ids)
            return render(result)

    @mcp.tool(name="delete_document", title="Delete a document", annotations=DELETES)
    async def delete_one_tool(
        doc_id: DocId,
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> DeleteDocumentResult:
        """Remove one document; NOT_FOUND when there is none."""
        async with tool_call("delete_document", db=logged(db_name), doc_id=doc_id) as counts:
            result = await documents.delete(lambda: rt.writing(db_name), [doc_id], None)
            if not result.deleted_doc_ids:
                where = "the main index" if db_name is None else f"database {db_name!r}"
                raise NotFound(f"no document with doc_id {doc_id} in {where}")
            counts["deleted_chunks"] = result.deleted_chunks
            return DeleteDocumentResult(deleted_chunks=result.deleted_chunks)

    @mcp.tool(name="ingest_file", title="Index a file", annotations=WRITES)
    async def ingest_file_tool(
        path: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "In the watched folder (or relative to it) or ALLOWED_ROOTS."))],
        library: Annotated[str | None, Field(max_length=100, json_schema_extra=doc(
            "Default: the default library, or its folder's library for a watched file."))] = None,
        metadata: Metadata = None,
    ) -> IngestResult:
        """Convert (PDF, Office, HTML, EPUB, CSV, images by OCR, text) and index a file;
        searchable when this returns."""
        async with tool_call("ingest_file", library=library) as counts:
            result = await ingest.ingest_file(
                rt.writing, rt.converter, rt.ingest_settings, path, library=library,
                metadata=metadata, watching=rt.watching)
            counts.update(status=result.status, chunks=result.chunks, format=result.format)
            return render(result)

    @mcp.tool(name="ingest_url", title="Index a web page", annotations=FETCHES)
    async def ingest_url_tool(
        url: Annotated[str, Field(min_length=1, max_length=4096, json_schema_extra=doc(
            "HTML, PDF, Office or text, within MAX_FILE_MB and 30 s."))],
        library: Annotated[str | None, Field(max_length=100, json_schema_extra=doc(
            "Default: the default library."))] = None,
        metadata: Metadata = None,
    ) -> IngestResult:
        """Download an http(s) page or document, convert and index it."""
        async with tool_call("ingest_url", library=library) as counts:
            result = await ingest.ingest_url(rt.writing, rt.converter, rt.ingest_settings, url,
                                             library=library, metadata=metadata)
            counts.update(status=result.status, chunks=result.chunks, format=result.format)
            return render(result)

    @mcp.tool(name="create_database", title="Create a separate database", annotations=WRITES)
    async def create_tool(
        db_name: Annotated[str, Field(description="1-64 letters, digits, _ or -.")],
    ) -> CreateDatabaseResult:
        """Create an empty database apart from the main index, for the tools taking
        `db_name`. One that exists is kept."""
        async with tool_call("create_database", db=logged(db_name)) as counts:
            path, created = await rt.create_database(db_name)
            counts["created"] = created
            return render(CreateDatabaseResult(success=True, db_path=path, created=created))
