"""What the operations take and give, once: the MCP tools publish these as their input and
output schemas, the CLI prints them as JSON, and the operations build them directly.

Descriptions of arguments are published in the tools' input schemas, sent to the client's
model on every turn: a few words where a name does not say enough, none where it does; what
`doc` adds to one is for the tools reference (docs/tools.md) only. Descriptions of results are
in the tools reference, not in the published output schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from pocketmcp.core.argdoc import DOC, doc

# -- arguments with structure ------------------------------------------------------------------

Scalar = str | int | float | bool


class Range(BaseModel):
    """Bounds of one field (numbers, or dates as in the filter's); all given must hold.
    Published inside the filter's `metadata` description, not as a schema of its own."""

    gt: float | str | None = None
    gte: float | str | None = None
    lt: float | str | None = None
    lte: float | str | None = None
    exists: bool | None = None  # true: the field is set; false: unset


# A filter's metadata conditions as published: the union of values and ranges spelled out
# as a schema is long and trips some clients; its description says the same in one line.
MetadataFilter = Annotated[dict[str, Scalar | list[Scalar] | Range] | None, WithJsonSchema({
    "type": "object",
    "description": "Field: a value, a list (any of) or a range (gt, gte, lt, lte, exists), "
                   "e.g. {\"status\": \"draft\", \"due\": {\"lt\": \"7d\"}}.",
    DOC: "Metadata or front matter fields. A range's bounds are numbers, or dates as the "
         "filter's; all given must hold; `exists`: true, the field is set, false, unset."})]


class SearchFilter(BaseModel):
    """All given must hold. Dates: ISO, or back from now (12h, 7d, 2w, 3m, 1y)."""

    doc_ids: list[int] | None = Field(None, json_schema_extra=doc("Only these documents."))
    path_glob: str | None = Field(None, description="Glob, e.g. 'notes/**/*.md'.",
                                  json_schema_extra=doc("Only files whose path matches it."))
    metadata: MetadataFilter = None
    tags: list[str] | None = Field(None, description="Any of these; 'a' matches 'a/b'.")
    tags_all: list[str] | None = Field(None, description="All of these.")
    modified_after: str | None = Field(None, json_schema_extra=doc("Changed at or after."))
    modified_before: str | None = None
    created_after: str | None = None
    created_before: str | None = None


class NewDocument(BaseModel):
    text: str = Field(min_length=1, description="Markdown or plain text.")
    external_id: str | None = Field(
        None, max_length=512, description="Your id; the same id again updates it.")
    title: str | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None


class Page(BaseModel):
    limit: int = Field(50, ge=1, le=500, json_schema_extra=doc("Documents per page."))
    cursor: str | None = Field(None, description="The last page's next_cursor.")


# -- search ------------------------------------------------------------------------------------

MODIFIED = "Last change: front matter or file properties, else the file's mtime (UTC)."
CREATED = "Front matter or file properties, else modified_at."
INDEXED = "When the index last took in the content."
STALE = "true: the file changed since it was indexed (re-read it); null: not a file."

class SearchMatch(BaseModel):
    chunk_id: int
    doc_id: int
    idx: int = Field(description="Position of the chunk in its document.")
    score: float = Field(description=(
        "Relevance from 0 to 1, with the same meaning in every mode, index and embedding "
        "model: vector mode, the cosine similarity read against the model's cosine for "
        "unrelated texts (0 for those, 1 for the same text); keyword mode, BM25 against the "
        "BM25 of a text that holds each "
        "query word once (0.5 for that text); hybrid, the two weighted by the vector weight. "
        "Below about 0.2 a match is rarely useful."))
    vector_score: float | None = Field(description="Cosine similarity, when it was scored.")
    keyword_score: float | None = Field(description="Raw BM25 score, when it matched keywords "
                                                    "(its scale depends on the index).")
    preview: str
    resource: str = Field(description="URI of the exact chunk text: read it as a resource.")
    path: str | None = Field(description="Path in the watched folder (None for raw text).")
    title: str
    section: str = Field(description="Heading path of the chunk, e.g. 'Guide > Install'.")
    library: str
    start_off: int
    end_off: int
    context: str | None = Field(
        None, description="The chunk with its neighbours, when `context` was asked for, or "
                          "the passage of neighbouring matches merged into this one.")
    merged_idx: list[int] = Field(
        default_factory=list,
        description="Positions (`idx`) of the chunks merged into this match as one passage, "
                    "in document order; empty when it is a single chunk.")
    modified_at: str | None = Field(None, description=MODIFIED)
    created: str | None = Field(None, description=CREATED)
    indexed_at: str | None = Field(None, description=INDEXED)
    tags: list[str] = Field(default_factory=list)
    stale: bool | None = Field(None, description=STALE)


class SearchResult(BaseModel):
    matches: list[SearchMatch]
    notice: str | None = Field(None, description=(
        "Set when the search could not run as asked (the embedding provider is unavailable, "
        "so only keyword results are shown), when no match reached score_threshold, or to "
        "say what a date in the query was taken to mean."))


class SimilarChunk(BaseModel):
    chunk_id: int
    doc_id: int
    text: str = Field(description="The chunk's text.")
    score: float = Field(description="Cosine similarity to the given text (1 - cosine "
                                     "distance); higher is closer.")


class FindSimilarResult(BaseModel):
    results: list[SimilarChunk] = Field(description="Best first.")
    notice: str | None = Field(None, description=(
        "Set when the embedding provider is unavailable: the results are then keyword "
        "matches and `score` is a keyword score, not a cosine similarity."))


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


class Document(DocumentInfo):
    created_at: str
    text: str


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
