"""MCP tools for separate databases: create one, insert, find similar, delete.

Thin over `pocketmcp.databases`; registered by `build_server`. Every tool takes an optional
`db_name`; without it the tool works on the main index.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from pocketmcp import databases
from pocketmcp.core.safe import safe, safe_text
from pocketmcp.server import DELETES, READ_ONLY, WRITES, _call
from pocketmcp.service import Service

DB_NAME = ("Name of a database made by create_database: 1-64 letters, digits, '_' or '-'. "
           "Leave it out to use the main index.")


class CreateDatabaseResult(BaseModel):
    success: bool
    db_path: str = Field(description="The database's SQLite file.")
    created: bool = Field(description="False when the database already existed.")


class InsertDocumentResult(BaseModel):
    doc_id: int
    chunk_count: int


class SimilarChunk(BaseModel):
    chunk_id: int
    doc_id: int
    text: str = Field(description="The chunk's text.")
    score: float = Field(description="Cosine similarity to the given text (1 - cosine "
                                     "distance); higher is closer.")


class FindSimilarResult(BaseModel):
    results: list[SimilarChunk] = Field(description="Best first.")


class DeleteDocumentResult(BaseModel):
    deleted_chunks: int



def _logged(db_name: str | None) -> str | None:
    """The database name as logged: any name is accepted here, so it is cut short."""
    return None if db_name is None else safe_text(db_name[:80])

def register_database_tools(mcp: MCPServer, service: Service) -> None:
    """Add create_database, insert_document, find_similar_documents and delete_document."""

    @mcp.tool(name="create_database", title="Create a separate database", annotations=WRITES)
    async def create_tool(
        db_name: Annotated[str, Field(description="1-64 letters, digits, '_' or '-'.")],
    ) -> CreateDatabaseResult:
        """Create a separate, empty database (its own SQLite file) to insert documents into
        and search apart from the main index. Creating one that exists is fine: `created`
        says which happened."""
        async with _call("create_database", db=_logged(db_name)) as counts:
            result = await databases.create_database(service, db_name)
            counts["created"] = result.created
            return CreateDatabaseResult(**safe({"success": True, "db_path": result.db_path,
                                                "created": result.created}))

    @mcp.tool(name="insert_document", title="Insert a document", annotations=WRITES)
    async def insert_tool(
        text: Annotated[str, Field(description="The document's text (Markdown or plain).")],
        metadata: dict[str, Any] | None = None,
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> InsertDocumentResult:
        """Chunk, embed and store one document; searchable as soon as this returns. The same
        text inserted again is the same document (its metadata is updated)."""
        async with _call("insert_document", db=_logged(db_name)) as counts:
            result = await databases.insert_document(service, text, metadata, db_name)
            counts["chunks"] = result.chunk_count
            return InsertDocumentResult(doc_id=result.doc_id, chunk_count=result.chunk_count)

    @mcp.tool(name="find_similar_documents", title="Find similar documents",
              annotations=READ_ONLY)
    async def find_tool(
        text: Annotated[str, Field(description="Text to find passages similar in meaning to.")],
        top_k: Annotated[int, Field(ge=1, le=databases.MAX_TOP_K,
                                    description="Number of results.")] = 10,
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> FindSimilarResult:
        """The chunks closest in meaning to `text` by cosine similarity, best first. Returns
        an object {results: [...]} because MCP structured output must be an object."""
        async with _call("find_similar_documents", db=_logged(db_name), top_k=top_k) as counts:
            found = await databases.find_similar(service, text, top_k, db_name)
            counts["results"] = len(found)
            return FindSimilarResult(results=[SimilarChunk(**safe({
                "chunk_id": s.chunk_id, "doc_id": s.doc_id, "text": s.text,
                "score": s.score})) for s in found])

    @mcp.tool(name="delete_document", title="Delete a document", annotations=DELETES)
    async def delete_tool(
        doc_id: Annotated[int, Field(ge=1)],
        db_name: Annotated[str | None, Field(description=DB_NAME)] = None,
    ) -> DeleteDocumentResult:
        """Remove one document and its chunks. An unknown doc_id is a NOT_FOUND error."""
        async with _call("delete_document", db=_logged(db_name), doc_id=doc_id) as counts:
            deleted = await databases.delete_document(service, doc_id, db_name)
            counts["deleted_chunks"] = deleted
            return DeleteDocumentResult(deleted_chunks=deleted)
