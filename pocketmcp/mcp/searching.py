"""The `search` tool without the MCP SDK: its parameters (their types, bounds and
descriptions, from which the SDK makes the tool's input schema), and what a call does. The
tool (mcp/tools_read.py) calls `run`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from pocketmcp.core.argdoc import doc
from pocketmcp.ops.checks import check_score
from pocketmcp.plans import Open, Reading
from pocketmcp.search import run as search
from pocketmcp.search.results import SearchFilter, SearchResult

Query = Annotated[str, Field(min_length=1, max_length=4000, json_schema_extra=doc(
    "Natural language, 1 to 4,000 characters."))]
TopK = Annotated[int, Field(ge=1, le=50)]
Library = Annotated[str | None, Field(max_length=100, description="Only this library.")]
Threshold = Annotated[float, Field(
    ge=0, le=1, description="Drop matches scoring less.", json_schema_extra=doc(
        "`score` is relevance from 0 to 1 on the same scale in every mode: 0.2 drops what "
        "shares neither words nor much meaning with the query, 0.3 keeps close matches "
        "only, 0 keeps everything."))]
Mode = Annotated[Literal["hybrid", "vector", "keyword"], Field(
    description="vector: meaning only; keyword: BM25 words only.",
    json_schema_extra=doc("hybrid fuses the two (best overall)."))]
UniqueDocs = Annotated[bool, Field(description="One match per document.")]
MaxPerDoc = Annotated[int, Field(
    ge=0, le=50, description="Matches per document (0: any); adjacent ones merge.",
    json_schema_extra=doc("A match next to a better one is merged into it as one passage "
                          "(`context`, `merged_idx`); 0 merges nothing."))]
Strict = Annotated[bool, Field(
    description="true: no match under score_threshold (default: the best few, with a notice).")]
Context = Annotated[int, Field(
    ge=0, le=3, description="Neighbour chunks to add each side.",
    json_schema_extra=doc("Joined with the chunk in the match's `context`."))]


class SearchArgs(BaseModel):
    """The tool's arguments as the SDK validates them (the same types and defaults)."""

    query: Query
    top_k: TopK = 8
    library: Library = None
    filter: SearchFilter | None = None
    score_threshold: Threshold = search.SCORE_THRESHOLD
    mode: Mode = "hybrid"
    unique_docs: UniqueDocs = False
    max_per_doc: MaxPerDoc = search.MAX_PER_DOC
    context: Context = 0
    strict_threshold: Strict = False


async def run(open_reading: Open[Reading], args: SearchArgs, counts: dict[str, Any]
              ) -> SearchResult:
    """The search `args` ask for, the index opened once they are found good (raises
    PocketError for what the op refuses)."""
    scope = search.Scope.of(args.filter, args.library)
    check_score(args.score_threshold)
    result = await search.search(
        await open_reading(), args.query, top_k=args.top_k, scope=scope,
        score_threshold=args.score_threshold, mode=args.mode,
        unique_docs=args.unique_docs, context=args.context, max_per_doc=args.max_per_doc,
        strict_threshold=args.strict_threshold, dates=True)
    counts["matches"] = len(result.matches)
    return result
