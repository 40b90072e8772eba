"""Documents given directly (not from the watched folder): write, remove, list, read.

`upsert_documents` and `insert_document` are one operation (`upsert`); `delete_documents` and
`delete_document` are one (`delete`). Writes go to the index's writer and return after their
commit, so what they wrote is searchable when they answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from pocketmcp.core.notes import read_note
from pocketmcp.core.paths import path_of
from pocketmcp.core.safe import safe_text
from pocketmcp.core.text import clean, sha256, title_of
from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.messages import DocRecord
from pocketmcp.ops.checks import check_metadata
from pocketmcp.ops.results import (
    ChunkSpan,
    ChunkText,
    DeleteResult,
    Document,
    DocumentInfo,
    DocumentList,
    Library,
    LibraryList,
    NewDocument,
    Passage,
    UpsertResult,
    UpsertResultItem,
)
from pocketmcp.pipeline.prepare import Progress
from pocketmcp.plans import Open, Writing
from pocketmcp.search.filters import Scope, check_ids, is_stale
from pocketmcp.search.results import SearchFilter
from pocketmcp.store.api import Listing, Reader, ReadIndex
from pocketmcp.store.rows import DocumentRow, Sort, Spot

# External ids of watched files, ingested files and ingested pages.
MAX_DOCS_PER_CALL = 64  # documents in one upsert_documents call
RESERVED_PREFIXES = ("file:", "path:", "url:")
PASSAGE_TOKENS = 1000  # get_document's passage around a chunk, by default
MAX_PASSAGE_TOKENS = 20_000
MIN_CHUNK_TOKENS = 4  # the fewest tokens a chunk is taken to hold, to bound the reading


def _record(doc: NewDocument, max_bytes: int) -> DocRecord:
    text = clean(safe_text(doc.text))
    if not text.strip():
        raise InvalidRequest("a document's text is empty")
    if len(text.encode("utf-8")) > max_bytes:
        raise InvalidRequest(f"a document is larger than MAX_FILE_MB ({max_bytes} bytes)")
    digest = sha256(text)
    external = safe_text(doc.external_id.strip()) if doc.external_id else f"raw:{digest[:32]}"
    if not external or external.startswith(RESERVED_PREFIXES):
        raise InvalidRequest(
            f"external_id {external!r} is not allowed: it must be non-empty and must not start "
            "with 'file:', 'path:' or 'url:' (reserved for files and pages)")
    note = read_note(text)  # raw text may be a note too: front matter, tags, links
    title = safe_text(doc.title) if doc.title else (note.title or title_of(text, external))
    return DocRecord(external_id=external, source="raw", uri=None, title=title, content=text,
                     sha256=digest, metadata=check_metadata(doc.metadata), facts=note.facts)


async def upsert(open_writing: Open[Writing], docs: Sequence[NewDocument], *, max_bytes: int,
                 progress: Progress | None = None) -> UpsertResult:
    """Insert or update raw documents, all in one transaction; searchable on return.
    `open_writing` is called once the arguments are found good; `progress(done, total,
    message)` hears of the chunks embedded, then of the commit."""
    if not docs:
        raise InvalidRequest("docs is empty: give at least one {text: ...}")
    if len(docs) > MAX_DOCS_PER_CALL:
        raise InvalidRequest(f"at most {MAX_DOCS_PER_CALL} documents per call")
    # Off the event loop: front matter is parsed and links are found in every text.
    records = await anyio.to_thread.run_sync(lambda: [_record(d, max_bytes) for d in docs])
    writing = await open_writing()
    embedded = 0  # steps: each chunk embedded, then the commit

    async def embedding(done: int, total: int | None, message: str) -> None:
        nonlocal embedded
        embedded = total or 0
        assert progress is not None
        await progress(done, embedded + 1, message)

    prepared = await writing.prepare.prepare(records, writing.index,
                                             progress=embedding if progress else None)
    written = await writing.writes.store(prepared)
    if progress is not None:
        await progress(embedded + 1, embedded + 1, f"{len(written)} documents committed")
    return UpsertResult(results=[
        UpsertResultItem(doc_id=w.doc_id, external_id=r.external_id, chunks=w.chunks,
                         status=w.status) for w, r in zip(written, records, strict=True)])


async def delete(open_writing: Open[Writing], doc_ids: Sequence[int] | None,
                 external_ids: Sequence[str] | None) -> DeleteResult:
    """Remove documents and their chunks, by doc_id and by external id."""
    if not doc_ids and not external_ids:
        raise InvalidRequest("give doc_ids or external_ids (or both)")
    ids = check_ids(doc_ids or [])
    writing = await open_writing()
    removed = await writing.writes.remove(ids, [safe_text(e) for e in external_ids or []])
    return DeleteResult(deleted_doc_ids=list(removed.doc_ids), deleted_chunks=removed.chunks,
                        not_found=list(removed.not_found))


# -- reading -----------------------------------------------------------------------------------

def encode_cursor(doc_id: int, modified: str | None = None) -> str:
    place: dict[str, Any] = {"after": doc_id}
    if modified is not None:
        place["m"] = modified
    return base64.urlsafe_b64encode(json.dumps(place).encode()).decode()


def decode_cursor(cursor: str, sort: Sort = "doc_id") -> tuple[str, int]:
    """(modified, doc_id) the previous page ended on."""
    try:
        place = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        after, modified = place["after"], place.get("m", "") if sort == "doc_id" else place["m"]
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest("cursor is not one this server returned for this sort") from None
    if not isinstance(after, int) or after < 0 or not isinstance(modified, str):
        raise InvalidRequest("cursor is not one this server returned")
    return modified, after


def _info(row: DocumentRow, root: Path | None) -> DocumentInfo:
    """A document as tools show it; its file is looked at (blocking) for `stale`."""
    return DocumentInfo(
        doc_id=row.doc_id, external_id=row.external_id, title=row.title,
        source=row.source,  # type: ignore[arg-type]  # the schema's CHECK keeps it one of three
        path=path_of(row.external_id, row.source), uri=row.uri, library=row.library,
        metadata={**json.loads(row.properties), **json.loads(row.metadata)},
        chunk_count=row.chunk_count, updated_at=row.updated_at, modified_at=row.modified,
        created=row.created, indexed_at=row.updated_at, tags=json.loads(row.tags),
        stale=is_stale(root, row.external_id, row.source, row.size_bytes, row.mtime_ns))


async def list_documents(open_index: Open[ReadIndex], limit: int, cursor: str | None, *,
                         library: str | None = None, metadata: dict[str, Any] | None = None,
                         flt: SearchFilter | None = None, sort: Sort = "doc_id"
                         ) -> DocumentList:
    """Documents in doc_id order, by last change (newest first) or by path (files by their
    path; documents given directly by their external id), a page at a time."""
    after = decode_cursor(cursor, sort) if cursor else None
    scope = Scope.of(flt, library, metadata) or Scope()
    index = await open_index()

    def page(reader: Listing) -> tuple[list[DocumentInfo], bool]:
        where = scope.where
        if scope.path_glob:
            where = msgspec.structs.replace(where, doc_ids=tuple(scope.doc_ids(reader) or ()))
        rows = reader.documents_page(where, limit + 1, sort=sort, after=after)
        return [_info(r, index.root) for r in rows[:limit]], len(rows) > limit

    found, more = await index.run(page)
    last = found[-1] if found else None
    place = {"modified": last.modified_at, "path": last.external_id}.get(sort) if last else None
    return DocumentList(documents=found, next_cursor=encode_cursor(last.doc_id, place) if (
        more and last) else None)


async def get_document(index: ReadIndex, doc_id: int, chunk_id: int | None = None,
                       max_tokens: int = PASSAGE_TOKENS) -> Document:
    """A document's metadata and whole text; with `chunk_id`, the passage of that chunk and
    its neighbours instead, as many as `max_tokens` holds (`around`)."""
    if not 1 <= max_tokens <= MAX_PASSAGE_TOKENS:
        raise InvalidRequest(f"max_tokens must be from 1 to {MAX_PASSAGE_TOKENS}")
    if chunk_id is not None:
        check_ids([chunk_id], "chunk_id")

    def read(reader: Reader) -> tuple[DocumentInfo | None, DocumentRow | None, str | None,
                                      Passage | None]:
        row = reader.document(doc_id)
        if row is None:
            return None, None, None, None
        if chunk_id is None:
            return _info(row, index.root), row, reader.content(doc_id), None
        text, passage = around(reader, row, chunk_id, max_tokens)
        return _info(row, index.root), row, text, passage

    info, row, text, passage = await index.run(read)
    if info is None or row is None or text is None:
        raise NotFound(f"no document with doc_id {doc_id}; search or list_documents gives ids")
    return Document(**info.model_dump(), created_at=row.created_at, text=text,
                    passage=passage)


def around(reader: Reader, row: DocumentRow, chunk_id: int, max_tokens: int
           ) -> tuple[str, Passage]:
    """The chunk and its nearest neighbours, one more at a time after it, then before it,
    while their tokens (summed: shared overlaps count twice) stay within `max_tokens`; the
    chunk alone when it holds more. The document's text from the first one's start to the
    last one's end (blocking)."""
    chunk = reader.chunk(chunk_id)
    if chunk is None or chunk.doc_id != row.doc_id:
        raise NotFound(f"no chunk {chunk_id} in document {row.doc_id}; a search match's "
                       "chunk_id and doc_id name one")
    reach = max_tokens // MIN_CHUNK_TOKENS + 1  # no more chunks than the budget can hold
    sizes = {idx: (a, b, t) for idx, a, b, t in reader.chunk_sizes(
        row.doc_id, chunk.idx - reach, chunk.idx + reach)}
    first = last = chunk.idx
    used = sizes[chunk.idx][2] if chunk.idx in sizes else 0
    grown = True
    while grown:
        grown = False
        for side in (last + 1, first - 1):
            if side in sizes and used + sizes[side][2] <= max_tokens:
                used += sizes[side][2]
                first, last, grown = min(first, side), max(last, side), True
    start = min(sizes[i][0] for i in range(first, last + 1)) if sizes else chunk.start_off
    end = max(sizes[i][1] for i in range(first, last + 1)) if sizes else chunk.end_off
    text = reader.excerpt(row.doc_id, start, end)
    assert text is not None  # the document was read in this same call
    spot = reader.spot(row.doc_id, first, last) or Spot(None, None)  # None: not stored
    return text, Passage(chunk_id=chunk_id, first_idx=first, last_idx=last, start_off=start,
                         end_off=end, start_line=spot.start_line, end_line=spot.end_line,
                         page=spot.page, end_page=spot.end_page, tokens=used,
                         more_before=first > 0, more_after=last + 1 < row.chunk_count)


async def get_chunk(index: ReadIndex, doc_id: int, chunk_id: int) -> ChunkText:
    row = await index.run(lambda r: r.chunk(chunk_id))
    if row is None or row.doc_id != doc_id:
        raise NotFound(f"no chunk {chunk_id} in document {doc_id}")
    return ChunkText(doc_id=row.doc_id, chunk_id=row.chunk_id, idx=row.idx, text=row.text,
                     start_off=row.start_off, end_off=row.end_off, title=row.title)


async def chunks(index: ReadIndex, doc_id: int) -> list[ChunkSpan]:
    """A document's chunks in order, with their offsets in its text."""
    def read(reader: Reader) -> tuple[DocumentRow | None, list[tuple[int, int, int, str]]]:
        return reader.document(doc_id), reader.neighbours(doc_id, 0, 2**31)

    row, found = await index.run(read)
    if row is None:
        raise NotFound(f"no document with doc_id {doc_id}; search or list_documents gives ids")
    return [ChunkSpan(idx=i, start_off=a, end_off=b, text=t) for i, a, b, t in found]


def original_file(index: ReadIndex, document: DocumentInfo) -> Path:
    """The watched file a document was read from (blocking: it is looked at)."""
    if document.source != "file" or document.path is None or index.root is None:
        raise NotFound(f"document {document.doc_id} was not read from a watched file")
    root = index.root.resolve()
    path = (root / document.path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise NotFound(f"the file of document {document.doc_id} is gone: {document.path}")
    return path


async def libraries(index: ReadIndex, default_library: str) -> LibraryList:
    rows = await index.run(lambda r: r.libraries())
    return LibraryList(libraries=[Library(name=n, documents=d, chunks=c) for n, d, c in rows],
                       default_library=default_library)
