"""Documents given directly (not from the watched folder): upsert, delete, list, get."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import msgspec
import numpy as np

from pocketmcp.config import MAX_DOCS_PER_CALL
from pocketmcp.core.safe import safe, safe_text
from pocketmcp.core.text import clean, sha256, title_of
from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.messages import Chunk
from pocketmcp.service import ReaderPool, Service
from pocketmcp.store.queries import DocumentRow, IndexReader, Scalar
from pocketmcp.store.writes import DocRecord, IndexWriter, Written

# External ids of watched files, ingested files and ingested pages.
RESERVED_PREFIXES = ("file:", "path:", "url:")


class NewDoc(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    external_id: str | None = None
    title: str | None = None
    metadata: dict[str, Any] | None = None


class Upserted(msgspec.Struct, frozen=True):
    doc_id: int
    external_id: str
    chunks: int
    status: Literal["inserted", "updated", "unchanged"]


async def vectors_for(service: Service, chunks: Sequence[Chunk],
                      readers: ReaderPool | None = None) -> bytes:
    """Vectors of `chunks`: ones stored in the index of `readers` (default: the main index)
    reused by text digest, the rest embedded."""
    assert service.engine is not None
    engine = service.engine
    dim = engine.spec.dim
    pool = readers or service.readers
    known = await pool.run(lambda r: r.vectors_for([c.sha256 for c in chunks]))
    out = np.zeros((len(chunks), dim), dtype=np.float32)
    missing = []
    for i, chunk in enumerate(chunks):
        vector = known.get(chunk.sha256)
        if vector is not None and len(vector) == dim * 4:
            out[i] = np.frombuffer(vector, dtype=np.float32)
        else:
            missing.append(i)
    step = service.config.embed_batch_size
    for start in range(0, len(missing), step):
        part = missing[start:start + step]
        rows = await anyio.to_thread.run_sync(engine.embedder.embed,
                                              [chunks[i].embed_text for i in part],
                                              limiter=engine.model_limiter)
        out[part] = rows
    return out.tobytes()


def _record(doc: NewDoc, max_bytes: int) -> DocRecord:
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
    title = safe_text(doc.title) if doc.title else title_of(text, external)
    metadata = safe(doc.metadata) if doc.metadata else {}
    return DocRecord(external_id=external, source="raw", uri=None, title=title, content=text,
                     sha256=digest, metadata=metadata)


async def upsert_documents(service: Service, docs: Sequence[NewDoc]) -> list[Upserted]:
    """Insert or update raw documents; searchable as soon as this returns."""
    if not docs:
        raise InvalidRequest("docs is empty: give at least one {text: ...}")
    if len(docs) > MAX_DOCS_PER_CALL:
        raise InvalidRequest(f"at most {MAX_DOCS_PER_CALL} documents per call")
    await service.wait_ready()
    service.require_writer()
    prepared = await prepare(service, docs)
    written = await service.write(write_prepared, prepared)
    return [Upserted(w.doc_id, rec.external_id, w.chunks, w.status)
            for w, (rec, _, _) in zip(written, prepared, strict=True)]


Prepared = tuple[DocRecord, tuple[Chunk, ...], bytes]


async def prepare(service: Service, docs: Sequence[NewDoc],
                  readers: ReaderPool | None = None) -> list[Prepared]:
    """Records, chunks and vectors of raw documents, ready for `write_prepared`. Vectors
    already stored in the index of `readers` (default: the main index) are reused."""
    records = [_record(d, service.config.max_file_bytes) for d in docs]
    return await prepare_records(service, records, readers)


async def prepare_records(service: Service, records: Sequence[DocRecord],
                          readers: ReaderPool | None = None) -> list[Prepared]:
    assert service.engine is not None
    chunker = service.engine.chunker
    prepared: list[Prepared] = []
    for record in records:
        chunks = await anyio.to_thread.run_sync(chunker.split, record.content)
        prepared.append((record, chunks, await vectors_for(service, chunks, readers)))
    return prepared


def write_prepared(writer: IndexWriter, prepared: Sequence[Prepared]) -> list[Written]:
    """Upsert prepared documents in one transaction (blocking: call in the writer's thread)."""
    with writer.transaction():
        return [writer.upsert(rec, chunks, vectors) for rec, chunks, vectors in prepared]


async def write_records(service: Service, records: Sequence[DocRecord]) -> list[Written]:
    """Chunk, embed (reusing stored vectors) and write documents in one transaction."""
    return await service.write(write_prepared, await prepare_records(service, records))


class Deleted(msgspec.Struct, frozen=True):
    deleted_doc_ids: list[int]
    deleted_chunks: int
    not_found: list[str]


async def delete_documents(service: Service, doc_ids: Sequence[int] | None,
                           external_ids: Sequence[str] | None) -> Deleted:
    if not doc_ids and not external_ids:
        raise InvalidRequest("give doc_ids or external_ids (or both)")
    await service.wait_ready()
    service.require_writer()
    wanted_ext = [safe_text(e) for e in external_ids or []]
    by_ext = await service.readers.run(lambda r: r.doc_ids_by_external(wanted_ext))
    targets = sorted(set(doc_ids or []) | set(by_ext.values()))
    missing_ext = [e for e in wanted_ext if e not in by_ext]

    def delete(writer: IndexWriter) -> list[tuple[int, int] | None]:
        with writer.transaction():
            return [writer.delete_doc(d) for d in targets]

    results = await service.write(delete)
    deleted = [r for r in results if r is not None]
    gone = {r[0] for r in deleted}
    not_found = missing_ext + [str(d) for d in (doc_ids or []) if d not in gone]
    return Deleted(sorted(gone), sum(r[1] for r in deleted), not_found)


def encode_cursor(doc_id: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": doc_id}).encode()).decode()


def decode_cursor(cursor: str) -> int:
    try:
        after = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
    except (ValueError, KeyError, TypeError):
        raise InvalidRequest("cursor is not one this server returned") from None
    if not isinstance(after, int) or after < 0:
        raise InvalidRequest("cursor is not one this server returned")
    return after


def describe(row: DocumentRow) -> dict[str, Any]:
    from pocketmcp.search import path_of

    return {
        "doc_id": row.doc_id, "external_id": row.external_id, "title": row.title,
        "source": row.source, "path": path_of(row.external_id, row.source), "uri": row.uri,
        "library": row.library, "metadata": json.loads(row.metadata),
        "chunk_count": row.chunk_count, "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


async def list_documents(service: Service, limit: int, cursor: str | None, *,
                         library: str | None = None,
                         metadata: dict[str, Scalar] | None = None,
                         ) -> tuple[list[dict[str, Any]], str | None]:
    after = decode_cursor(cursor) if cursor else 0
    await service.wait_ready()
    rows = await service.readers.run(
        lambda r: r.documents_page(after, limit + 1, library, metadata))
    more = len(rows) > limit
    rows = rows[:limit]
    return [describe(r) for r in rows], (encode_cursor(rows[-1].doc_id) if more else None)


async def get_document(service: Service, doc_id: int) -> dict[str, Any]:
    await service.wait_ready()

    def read(reader: IndexReader) -> tuple[DocumentRow | None, str | None]:
        return reader.document(doc_id), reader.content(doc_id)

    row, text = await service.readers.run(read)
    if row is None or text is None:
        raise NotFound(f"no document with doc_id {doc_id}; search or list_documents gives ids")
    return {**describe(row), "text": text}


async def get_chunk(service: Service, doc_id: int, chunk_id: int) -> dict[str, Any]:
    await service.wait_ready()
    row = await service.readers.run(lambda r: r.chunk(chunk_id))
    if row is None or row.doc_id != doc_id:
        raise NotFound(f"no chunk {chunk_id} in document {doc_id}")
    return {"doc_id": row.doc_id, "chunk_id": row.chunk_id, "idx": row.idx, "text": row.text,
            "start_off": row.start_off, "end_off": row.end_off, "title": row.title}
