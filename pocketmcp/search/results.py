"""What a search takes and gives: the tools' filter argument and their matches. The MCP tools
publish these as their input and output schemas, the CLI prints them as JSON, and the search
builds them directly (ops/results.py holds the other tools' types, alike).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

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

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

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


# -- search ------------------------------------------------------------------------------------

MODIFIED = "Last change: front matter or file properties, else the file's mtime (UTC)."
CREATED = "Front matter or file properties, else modified_at."
INDEXED = "When the index last took in the content."
LINES = ("Line of the match's first character (1-based) in the document's text: the file's "
         "own lines for text files, the converted text's for other formats (get_document).")
PAGE = "PDF page (1-based) of its first character; null for other formats."
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
    start_line: int | None = Field(None, json_schema_extra=doc(LINES))
    end_line: int | None = Field(None, json_schema_extra=doc("Line of its last character."))
    page: int | None = Field(None, json_schema_extra=doc(PAGE))
    end_page: int | None = Field(None, json_schema_extra=doc("PDF page of its last "
                                                             "character."))
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
    matched_date: str | None = Field(None, json_schema_extra=doc(
        "When the query named a time ('this week'): the created date that placed the "
        "document there. Such a match is kept whatever its score."))


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
