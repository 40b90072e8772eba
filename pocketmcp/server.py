"""The MCP front end: tools and resources, thin over the service, documents and search."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from pocketmcp import __version__, logs
from pocketmcp.config import MAX_DOCS_PER_CALL
from pocketmcp.core.safe import safe, safe_text
from pocketmcp.errors import NotFound, PocketError
from pocketmcp.ingest import check_metadata_filter
from pocketmcp.service import Service

log = logs.get("pocketmcp.tools")

DEFAULT_INSTRUCTIONS = (
    "PocketMCP searches the user's local documents (notes, PDFs, Word files, web pages) by "
    "meaning and keywords. Call `search` with a natural-language query; each match has a "
    "`resource` URI (mcp+doc://DOC#CHUNK) to read the exact passage, and `get_document` "
    "returns a whole document. Documents sit in libraries (`list_libraries`); `search` can be "
    "limited to one. `ingest_file` and `ingest_url` add a file or a web page, "
    "`upsert_documents` adds text; `status` tells whether indexing is done."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)


# -- schemas ----------------------------------------------------------------------------------

class SearchFilter(BaseModel):
    doc_ids: list[int] | None = Field(None, description="Only these documents.")
    path_glob: str | None = Field(
        None, description="Only files whose path matches this glob, e.g. 'notes/**/*.md'.")
    metadata: dict[str, str | int | float | bool] | None = Field(
        None, description="Only documents whose metadata has these top-level values, e.g. "
                          "{\"project\": \"apollo\"}.")


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


class NewDocument(BaseModel):
    text: str = Field(min_length=1, description="The document's text (Markdown or plain).")
    external_id: str | None = Field(
        None, max_length=512,
        description="Your id for it; upserting the same id again updates it.")
    title: str | None = Field(None, max_length=1000)
    metadata: dict[str, Any] | None = None


class UpsertResultItem(BaseModel):
    doc_id: int
    external_id: str
    chunks: int
    status: Literal["inserted", "updated", "unchanged"]


class UpsertResult(BaseModel):
    results: list[UpsertResultItem]


class DeleteResult(BaseModel):
    deleted_doc_ids: list[int]
    deleted_chunks: int
    not_found: list[str] = Field(description="Requested ids that matched nothing.")


class Page(BaseModel):
    limit: int = Field(50, ge=1, le=500)
    cursor: str | None = Field(None, description="next_cursor of the previous page.")


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


class Library(BaseModel):
    name: str
    documents: int
    chunks: int


class LibraryList(BaseModel):
    libraries: list[Library]
    default_library: str = Field(description="Where documents go when no library is named.")


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


# -- helpers ----------------------------------------------------------------------------------

@asynccontextmanager
async def _call(tool: str, **fields: Any) -> AsyncIterator[dict[str, Any]]:
    """One JSON log line per tool call; PocketErrors become tool errors the model can read."""
    started = time.perf_counter()
    counts: dict[str, Any] = {}
    outcome = "ok"
    try:
        yield counts
    except PocketError as exc:
        outcome = "error"
        counts["error"] = str(exc)
        raise ToolError(safe_text(f"{exc.code}: {exc}")) from exc
    except BaseException as exc:
        outcome = "error"
        counts["error"] = repr(exc)
        raise
    finally:
        log.info("tool_call", tool=tool, outcome=outcome,
                 duration_ms=round((time.perf_counter() - started) * 1000, 1),
                 **fields, **counts)


def build_server(service: Service, *, name: str = "pocketmcp",
                 instructions: str | None = None) -> MCPServer:
    from pocketmcp import documents as store
    from pocketmcp import ingest
    from pocketmcp.search import Filter, search

    mcp: MCPServer = MCPServer(name=name, instructions=instructions or DEFAULT_INSTRUCTIONS,
                               version=__version__)

    @mcp.tool(name="search", title="Search documents", annotations=READ_ONLY)
    async def search_tool(
        query: Annotated[str, Field(min_length=1, max_length=4000,
                                    description="What to look for, in natural language.")],
        top_k: Annotated[int, Field(ge=1, le=50, description="Number of matches.")] = 8,
        library: Annotated[str | None, Field(
            max_length=100, description="Only this library (see list_libraries); "
                                        "all when omitted.")] = None,
        filter: SearchFilter | None = None,
        score_threshold: Annotated[float | None, Field(
            description="Drop matches whose `score` is below this (in vector mode a cosine "
                        "similarity, e.g. 0.3).")] = None,
        mode: Annotated[Literal["hybrid", "vector", "keyword"], Field(
            description="hybrid: meaning and keywords fused (best overall); vector: meaning "
                        "only; keyword: BM25 on words only.")] = "hybrid",
        unique_docs: Annotated[bool, Field(
            description="At most one match (the best chunk) per document.")] = False,
        context: Annotated[int, Field(
            ge=0, le=3, description="Also return this many neighbouring chunks on each side, "
                                    "joined, in `context`.")] = 0,
    ) -> SearchResult:
        """Find the passages most relevant to a query, best first."""
        async with _call("search", top_k=top_k, mode=mode) as counts:
            flt = None
            meta = check_metadata_filter(filter.metadata) if filter is not None else None
            if library is not None or (filter is not None and (
                    filter.doc_ids is not None or filter.path_glob or meta)):
                flt = Filter(
                    doc_ids=tuple(filter.doc_ids) if filter and filter.doc_ids is not None
                    else None, path_glob=filter.path_glob if filter else None,
                    library=library, metadata=meta)
            matches = await search(service, query, top_k=top_k, flt=flt,
                                   score_threshold=score_threshold, mode=mode,
                                   unique_docs=unique_docs, context=context)
            counts["matches"] = len(matches)
            return SearchResult(matches=[SearchMatch(**safe({
                f: getattr(m, f) for f in SearchMatch.model_fields})) for m in matches])

    @mcp.tool(name="upsert_documents", title="Add or update documents", annotations=WRITES)
    async def upsert_tool(
        docs: Annotated[list[NewDocument], Field(
            min_length=1, max_length=MAX_DOCS_PER_CALL,
            description="Documents to insert, or update by external_id.")],
    ) -> UpsertResult:
        """Index text given directly; it is searchable as soon as this returns."""
        async with _call("upsert_documents", docs=len(docs)) as counts:
            results = await store.upsert_documents(service, [
                store.NewDoc(text=d.text, external_id=d.external_id, title=d.title,
                             metadata=d.metadata) for d in docs])
            counts["chunks"] = sum(r.chunks for r in results)
            return UpsertResult(results=[UpsertResultItem(**safe({
                "doc_id": r.doc_id, "external_id": r.external_id, "chunks": r.chunks,
                "status": r.status})) for r in results])

    @mcp.tool(name="delete_documents", title="Delete documents", annotations=DELETES)
    async def delete_tool(
        doc_ids: list[int] | None = None, external_ids: list[str] | None = None,
    ) -> DeleteResult:
        """Remove documents and their chunks. A deleted file of the watched folder comes back
        when it changes or at the next start; delete the file itself to remove it for good."""
        async with _call("delete_documents") as counts:
            result = await store.delete_documents(service, doc_ids, external_ids)
            counts["deleted"] = len(result.deleted_doc_ids)
            return DeleteResult(**safe(msgspec_to_dict(result)))

    @mcp.tool(name="list_documents", title="List documents", annotations=READ_ONLY)
    async def list_tool(
        page: Page | None = None,
        library: Annotated[str | None, Field(
            max_length=100, description="Only this library; all when omitted.")] = None,
        metadata: Annotated[dict[str, str | int | float | bool] | None, Field(
            description="Only documents whose metadata has these top-level values.")] = None,
    ) -> DocumentList:
        """Indexed documents in doc_id order, a page at a time."""
        page = page or Page(limit=50, cursor=None)
        async with _call("list_documents", limit=page.limit, library=library) as counts:
            rows, cursor = await store.list_documents(
                service, page.limit, page.cursor, library=library,
                metadata=check_metadata_filter(metadata))
            counts["documents"] = len(rows)
            return DocumentList(documents=[DocumentInfo(**safe({
                f: r[f] for f in DocumentInfo.model_fields})) for r in rows], next_cursor=cursor)

    @mcp.tool(name="get_document", title="Get a whole document", annotations=READ_ONLY)
    async def get_tool(doc_id: Annotated[int, Field(ge=1)]) -> Document:
        """The whole text of one document, with its metadata."""
        async with _call("get_document", doc_id=doc_id) as counts:
            row = await store.get_document(service, doc_id)
            counts["chars"] = len(row["text"])
            return Document(**safe({f: row[f] for f in Document.model_fields}))

    @mcp.tool(name="ingest_file", title="Index a file", annotations=WRITES)
    async def ingest_file_tool(
        path: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "The file: absolute, or relative to the watched folder. It must lie inside the "
            "watched folder or ALLOWED_ROOTS."))],
        library: Annotated[str | None, Field(
            max_length=100, description="Library to put it in (default: DEFAULT_LIBRARY, or "
                                        "its folder's library for a watched file).")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(
            description="Your fields, returned with it and usable as search filters.")] = None,
    ) -> IngestResult:
        """Convert (PDF, Word, HTML, PowerPoint, Excel, EPUB, CSV, text) and index one file
        now; searchable when this returns. Asking again re-reads it: unchanged content is
        skipped."""
        async with _call("ingest_file", library=library) as counts:
            done = await ingest.ingest_file(service, path, library, metadata)
            counts.update(status=done.status, chunks=done.chunks, format=done.format)
            return IngestResult(**safe(msgspec_to_dict(done)))

    @mcp.tool(name="ingest_url", title="Index a web page",
              annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                          idempotent_hint=True, open_world_hint=True))
    async def ingest_url_tool(
        url: Annotated[str, Field(min_length=1, max_length=4096,
                                  description="An http or https URL.")],
        library: Annotated[str | None, Field(
            max_length=100, description="Library to put it in (default: DEFAULT_LIBRARY).")
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(
            description="Your fields, returned with it and usable as search filters.")] = None,
    ) -> IngestResult:
        """Download a page or document (HTML, PDF, Office, text; within MAX_FILE_MB and
        URL_TIMEOUT_S), convert it to text and index it."""
        async with _call("ingest_url", library=library) as counts:
            done = await ingest.ingest_url(service, url, library, metadata)
            counts.update(status=done.status, chunks=done.chunks, format=done.format)
            return IngestResult(**safe(msgspec_to_dict(done)))

    @mcp.tool(name="list_libraries", title="List libraries", annotations=READ_ONLY)
    async def list_libraries_tool() -> LibraryList:
        """Libraries (named collections) with their document and chunk counts."""
        async with _call("list_libraries") as counts:
            await service.wait_ready()
            rows = await service.readers.run(lambda r: r.libraries())
            counts["libraries"] = len(rows)
            return LibraryList(libraries=[Library(**safe({"name": n, "documents": d,
                                                          "chunks": c})) for n, d, c in rows],
                               default_library=safe_text(service.config.default_library))

    @mcp.tool(name="reindex", title="Rescan the watched folder", annotations=WRITES)
    async def reindex_tool(
        ctx: Context,
        force: Annotated[bool, Field(
            description="Re-read and re-embed every file, even unchanged ones.")] = False,
        path_glob: Annotated[str | None, Field(
            description="Only rescan files whose path matches this glob.")] = None,
    ) -> ReindexResult:
        """Scan the watched folder again and bring the index up to date."""
        async with _call("reindex", force=force) as counts:
            result = await _reindex(service, ctx, force=force, path_glob=path_glob)
            counts.update(result.model_dump())
            return result

    @mcp.tool(name="status", title="Index status", annotations=READ_ONLY)
    async def status_tool() -> StatusResult:
        """Documents, chunks, model, index path, queues and progress of indexing."""
        async with _call("status"):
            return await _status(service)

    @mcp.resource("mcp+doc://{doc_id}", name="document", mime_type="application/json",
                  description="A whole document: text and metadata.")
    async def document_resource(doc_id: str) -> str:
        async with _call("resource_document", doc_id=doc_id):
            try:
                row = await store.get_document(service, _int(doc_id))
            except NotFound as exc:
                raise ResourceNotFoundError(str(exc)) from exc
            return _json(row)

    @mcp.resource("mcp+doc://{doc_id}#{chunk_id}", name="chunk", mime_type="application/json",
                  description="One chunk: its exact text and offsets in the document.")
    async def chunk_resource(doc_id: str, chunk_id: str) -> str:
        async with _call("resource_chunk", doc_id=doc_id, chunk_id=chunk_id):
            try:
                row = await store.get_chunk(service, _int(doc_id), _int(chunk_id))
            except NotFound as exc:
                raise ResourceNotFoundError(str(exc)) from exc
            return _json(row)

    from pocketmcp.server_databases import register_database_tools

    register_database_tools(mcp, service)
    return mcp


def msgspec_to_dict(value: Any) -> dict[str, Any]:
    import msgspec

    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ResourceNotFoundError(f"{text!r} is not a numeric id") from None
    if value < 1:
        raise ResourceNotFoundError(f"{text!r} is not a valid id")
    return value


def _json(row: dict[str, Any]) -> str:
    import json

    return json.dumps(safe(row), ensure_ascii=False)


async def _reindex(service: Service, ctx: Context, *, force: bool,
                   path_glob: str | None) -> ReindexResult:
    import anyio
    import pathspec

    from pocketmcp.errors import InvalidRequest
    from pocketmcp.pipeline.supervisor import PipelineBusy, PipelineStopped

    await service.wait_ready()
    service.require_writer()
    pipeline = service.pipeline
    if pipeline is None:
        raise InvalidRequest("no folder is watched: start the server with WATCH_DIR (or "
                          "--data-folder) set to reindex it")
    only = None
    if path_glob:
        spec = pathspec.PathSpec.from_lines("gitignore", [path_glob])
        only = spec.match_file
    started = time.perf_counter()
    before = pipeline.stats.processed + pipeline.stats.removed
    seen_before = pipeline.stats.seen
    result: dict[str, Any] = {}
    finished = anyio.Event()

    async def run() -> None:
        try:
            result["stats"] = await pipeline.rescan(force=force, only=only)
        except (PipelineBusy, PipelineStopped) as exc:
            result["error"] = exc
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, name="pocketmcp.reindex")
        while not finished.is_set():
            done = pipeline.stats.processed + pipeline.stats.removed - before
            total = max(pipeline.stats.seen - seen_before, done)
            await ctx.report_progress(done, total or None, f"{done} of {total} files checked")
            with anyio.move_on_after(0.25):
                await finished.wait()
    if "error" in result:
        error = result["error"]
        if isinstance(error, PipelineBusy):
            raise PipelineBusy("a reindex is already running; wait for it to finish")
        raise PocketError(str(error))
    s = result["stats"]
    counts = await service.readers.run(lambda r: r.counts())
    return ReindexResult(
        files_added=s.added, files_updated=s.updated, files_removed=s.removed,
        files_unchanged=s.unchanged, files_skipped=s.skipped,
        chunks_embedded=s.chunks_embedded, chunks_total=counts["chunks"],
        elapsed_ms=round((time.perf_counter() - started) * 1000),
    )


async def _status(service: Service) -> StatusResult:
    from pocketmcp.model import canonical_id

    counts: dict[str, int] | None = None
    if service.ready.is_set():
        counts = await service.readers.run(lambda r: r.counts())
    pipeline = service.pipeline
    st = service.status
    engine = service.engine
    return StatusResult(
        phase=st.phase, role=st.role, model=canonical_id(service.config.model_id),
        model_ready=st.model_ready, dimensions=engine.spec.dim if engine else None,
        index_path=str(service.config.sqlite_path.resolve()),
        watch_dir=str(service.config.watch_dir.resolve()) if service.watch else None,
        documents=counts["documents"] if counts else None,
        chunks=counts["chunks"] if counts else None,
        initial_indexing_done=st.initial_indexing_done,
        queue_depths=pipeline.queue_depths() if pipeline else {},
        files_indexed_since_start=(pipeline.stats.added + pipeline.stats.updated
                                   if pipeline else 0),
        last_error=safe_text(st.last_error) if st.last_error else None,
        version=__version__,
    )
