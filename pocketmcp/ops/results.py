"""What the operations take and give, once: the MCP tools publish these as their input and
output schemas, the CLI prints them as JSON, and the operations build them directly.

Field descriptions are what a client's model reads about each result, so they say what a
value means and how to use it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# -- arguments with structure ------------------------------------------------------------------

Scalar = str | int | float | bool


class SearchFilter(BaseModel):
    doc_ids: list[int] | None = Field(None, description="Only these documents.")
    path_glob: str | None = Field(
        None, description="Only files whose path matches this glob, e.g. 'notes/**/*.md'.")
    metadata: dict[str, Scalar] | None = Field(
        None, description="Only documents whose metadata has these top-level values, e.g. "
                          "{\"project\": \"apollo\"}.")


class NewDocument(BaseModel):
    text: str = Field(min_length=1, description="The document's text (Markdown or plain).")
    external_id: str | None = Field(
        None, max_length=512,
        description="Your id for it; upserting the same id again updates it.")
    title: str | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None


class Page(BaseModel):
    limit: int = Field(50, ge=1, le=500)
    cursor: str | None = Field(None, description="next_cursor of the previous page.")


# -- search ------------------------------------------------------------------------------------

class SearchMatch(BaseModel):
    chunk_id: int
    doc_id: int
    idx: int = Field(description="Position of the chunk in its document.")
    score: float = Field(description=(
        "Higher is better. vector mode: 1 - cosine distance; keyword mode: BM25 scaled to "
        "0-1 within the results; hybrid: the fused score (a weighted sum of the two lists' "
        "standard scores, shifted to start at 0; compare it within one result list)."))
    vector_score: float | None = Field(description="Cosine similarity, when it was scored.")
    keyword_score: float | None = Field(description="BM25 score, when it matched keywords.")
    preview: str
    resource: str = Field(description="URI of the exact chunk text: read it as a resource.")
    path: str | None = Field(description="Path in the watched folder (None for raw text).")
    title: str
    section: str = Field(description="Heading path of the chunk, e.g. 'Guide > Install'.")
    library: str
    start_off: int
    end_off: int
    context: str | None = Field(
        None, description="The chunk with its neighbours, when `context` was asked for.")


class SearchResult(BaseModel):
    matches: list[SearchMatch]


class SimilarChunk(BaseModel):
    chunk_id: int
    doc_id: int
    text: str = Field(description="The chunk's text.")
    score: float = Field(description="Cosine similarity to the given text (1 - cosine "
                                     "distance); higher is closer.")


class FindSimilarResult(BaseModel):
    results: list[SimilarChunk] = Field(description="Best first.")


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
    metadata: dict[str, Any]
    chunk_count: int
    updated_at: str


class DocumentList(BaseModel):
    documents: list[DocumentInfo]
    next_cursor: str | None = None


class Document(DocumentInfo):
    created_at: str
    text: str


class ChunkText(BaseModel):
    doc_id: int
    chunk_id: int
    idx: int
    text: str
    start_off: int
    end_off: int
    title: str


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
    db_path: str = Field(description="The database's SQLite file.")
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
    elapsed_ms: int


class StatusResult(BaseModel):
    phase: str
    role: str = Field(description="writer: this process indexes; reader: another one does.")
    model: str
    model_ready: bool
    dimensions: int | None
    index_path: str
    watch_dir: str | None
    documents: int | None
    chunks: int | None
    initial_indexing_done: bool
    queue_depths: dict[str, dict[str, int]]
    files_indexed_since_start: int
    last_error: str | None
    version: str
