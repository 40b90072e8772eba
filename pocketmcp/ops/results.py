"""What the operations take and give, once: the MCP tools publish these as their input and
output schemas, the CLI prints them as JSON, and the operations build them directly.

Descriptions of arguments are published in the tools' input schemas, sent to the client's
model on every turn: a few words where a name does not say enough, none where it does; what
`doc` adds to one is for the tools reference (docs/tools.md) only. Descriptions of results are
in the tools reference, not in the published output schemas.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from pocketmcp.core.argdoc import doc
from pocketmcp.search.results import CREATED, INDEXED, MODIFIED, STALE

# -- arguments with structure ------------------------------------------------------------------


class NewDocument(BaseModel):
    text: str = Field(min_length=1, description="Markdown or plain text.")
    external_id: str | None = Field(
        None, max_length=512, description="Your id; the same id again updates it.")
    title: str | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None


class Page(BaseModel):
    limit: int = Field(50, ge=1, le=500, json_schema_extra=doc("Documents per page."))
    cursor: str | None = Field(None, description="The last page's next_cursor.")


# -- documents ---------------------------------------------------------------------------------

class UpsertResultItem(BaseModel):
    doc_id: int
    external_id: str
    chunks: int
    status: Literal["inserted", "updated", "unchanged"]


class UpsertResult(BaseModel):
    results: list[UpsertResultItem]


class InsertDocumentResult(BaseModel):
    doc_id: int
    chunk_count: int


class DeleteResult(BaseModel):
    deleted_doc_ids: list[int]
    deleted_chunks: int
    not_found: list[str] = Field(description="Requested ids that matched nothing.")


class DeleteDocumentResult(BaseModel):
    deleted_chunks: int


class DocumentInfo(BaseModel):
    doc_id: int
    external_id: str
    title: str
    source: Literal["file", "url", "raw"]
    path: str | None
    uri: str | None
    library: str
    metadata: dict[str, Any] = Field(description=(
        "Fields given with the document, over its own front matter or file properties."))
    chunk_count: int
    updated_at: str
    modified_at: str | None = Field(None, description=MODIFIED)
    created: str | None = Field(None, description=CREATED)
    indexed_at: str | None = Field(None, description=INDEXED)
    tags: list[str] = Field(default_factory=list)
    stale: bool | None = Field(None, description=STALE)


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    next_cursor: str | None = None


class Passage(BaseModel):
    """Where the passage `get_document` returned for a chunk lies in the document: its
    chunks' positions (`idx`), offsets, lines (1-based, inclusive) and PDF pages, its model
    tokens, and whether the document goes on before and after it."""

    chunk_id: int
    first_idx: int
    last_idx: int
    start_off: int
    end_off: int
    start_line: int | None
    end_line: int | None
    page: int | None = None
    end_page: int | None = None
    tokens: int
    more_before: bool
    more_after: bool


class Document(DocumentInfo):
    created_at: str
    text: str = Field(json_schema_extra=doc("The whole text; with `chunk_id`, the passage "
                                            "around that chunk (`passage` says where)."))
    passage: Passage | None = None


class LinkedDocument(BaseModel):
    doc_id: int
    title: str
    path: str | None


class OutgoingLink(BaseModel):
    target: str = Field(description="The link as written: 'Note', '../other.md'.")
    kind: Literal["wiki", "markdown"]
    documents: list[LinkedDocument] = Field(description=(
        "The indexed documents it points to: none when its target is not indexed, several "
        "when more than one document has that name."))


class LinksResult(BaseModel):
    doc_id: int
    title: str
    path: str | None
    outgoing: list[OutgoingLink] = Field(description="What this document links to, in order.")
    incoming: list[LinkedDocument] = Field(description="Documents that link to this one.")


class ChunkText(BaseModel):
    doc_id: int
    chunk_id: int
    idx: int
    text: str
    start_off: int
    end_off: int
    title: str


class ChunkSpan(BaseModel):
    """One chunk of a document as the web page shows it: where it sits in the text."""

    idx: int
    start_off: int
    end_off: int
    text: str


class Library(BaseModel):
    name: str
    documents: int
    chunks: int


class LibraryList(BaseModel):
    libraries: list[Library]
    default_library: str = Field(description="Where documents go when no library is named.")


class IngestResult(BaseModel):
    doc_id: int
    external_id: str
    library: str
    status: Literal["indexed", "skipped", "replaced"] = Field(description=(
        "indexed: new; skipped: the same content is already indexed; replaced: the "
        "document's earlier content was replaced."))
    chunks: int
    title: str
    format: str = Field(description="How it was read: pdf, docx, html, text, ...")


class CreateDatabaseResult(BaseModel):
    success: bool
    db_path: str = Field(description="Where the database is: its SQLite file, or its Postgres "
                         "schema.")
    created: bool = Field(description="False when the database already existed.")


# -- the index ---------------------------------------------------------------------------------

class ReindexResult(BaseModel):
    files_added: int
    files_updated: int
    files_removed: int
    files_unchanged: int
    files_skipped: int
    chunks_embedded: int
    chunks_total: int
    chunks_waiting: int = Field(0, description="Chunks searchable by keywords whose vectors "
                                "are still coming: search by meaning finds them once in.")
    elapsed_ms: int


class ExportResult(BaseModel):
    path: str
    documents: int
    chunks: int
    chunks_waiting: int = Field(0, description="Chunks exported without a vector (written "
                                "for keyword search, still waiting for theirs).")
    bytes: int
    elapsed_ms: int


class ImportResult(BaseModel):
    path: str
    documents: int
    chunks: int
    chunks_embedded: int = Field(description="0 when the export's model is the index's.")
    chunks_waiting: int = Field(0, description="Chunks written without a vector: found by "
                                "their keywords until a running server or the next "
                                "`pocketmcp index` embeds them.")
    same_model: bool
    elapsed_ms: int


class BackupResult(BaseModel):
    path: str
    bytes: int
    elapsed_ms: int
