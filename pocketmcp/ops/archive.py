"""Export, import and backup of an index.

The export format (`pocketmcp export FILE`) is JSON Lines, UTF-8, one object a line:

1. a header: `{"format": "pocketmcp-export", "version": 1, "model_id": ..., "dim": 384,
   "vector": "float32-le-base64", "exported_at": ...}`;
2. one line per document: `{"type": "document", "external_id", "source", "uri", "title",
   "library", "metadata", "properties", "tags", "created", "modified", "links":
   [{"target", "key", "kind"}], "content", "sha256", "size_bytes", "mtime_ns",
   "first_indexed_at", "indexed_at", "chunks": [{"idx", "start", "end", "tokens", "sha256",
   "section", "vector"}]}`, where a chunk's text is `content[start:end]` and `vector` is its
   embedding as little-endian float32, base64;
3. a trailer: `{"type": "end", "documents": N, "chunks": M}`, so a cut-off file is noticed.

`pocketmcp import FILE` writes the documents through the index's writer, in transactions of
up to IMPORT_BATCH documents. When the file's model is the index's, the stored vectors are
used and nothing is embedded; otherwise each document is chunked and embedded again.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from pocketmcp.core import dates
from pocketmcp.core.identity import Identity
from pocketmcp.errors import InvalidRequest, StoreError
from pocketmcp.messages import Chunk, DocFacts, DocRecord, Link, PreparedDoc
from pocketmcp.ops.results import BackupResult, ExportResult, ImportResult
from pocketmcp.plans import Open, Writing
from pocketmcp.store import archive
from pocketmcp.store.api import Place, Reader

FORMAT = "pocketmcp-export"
VERSION = 1
IMPORT_BATCH = 32  # documents per transaction


class Header(msgspec.Struct, frozen=True):
    format: str
    version: int
    model_id: str
    dim: int
    vector: str = "float32-le-base64"
    exported_at: str = ""
    # What made the vectors (provider, prefixes: core/identity.py); older files name the
    # model alone, which then means the built-in provider without prefixes.
    embedding: dict[str, str] = msgspec.field(default_factory=dict)

    def identity(self) -> Identity:
        return (Identity.from_meta(self.embedding)
                or Identity(model=self.model_id, dim=self.dim))


class ChunkLine(msgspec.Struct, frozen=True):
    idx: int
    start: int
    end: int
    tokens: int
    sha256: str
    section: str
    vector: str


class DocLine(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="document"):
    external_id: str
    source: Literal["file", "url", "raw"]
    uri: str | None
    title: str
    library: str
    metadata: dict[str, Any]
    properties: dict[str, Any]
    tags: list[str]
    created: str | None
    modified: str | None
    links: list[Link]
    content: str
    sha256: str
    size_bytes: int | None
    mtime_ns: int | None
    first_indexed_at: str = ""
    indexed_at: str = ""
    chunks: list[ChunkLine]


class EndLine(msgspec.Struct, frozen=True, tag_field="type", tag="end"):
    documents: int
    chunks: int


# -- export ------------------------------------------------------------------------------------

def _line(doc: archive.StoredDoc) -> DocLine:
    return DocLine(
        external_id=doc.external_id,
        source=doc.source,  # type: ignore[arg-type]  # the schema's CHECK keeps it one of three
        uri=doc.uri, title=doc.title, library=doc.library,
        metadata=json.loads(doc.metadata), properties=json.loads(doc.properties),
        tags=json.loads(doc.tags), created=doc.created, modified=doc.modified,
        links=list(doc.links), content=doc.content, sha256=doc.sha256,
        size_bytes=doc.size_bytes, mtime_ns=doc.mtime_ns,
        first_indexed_at=doc.first_indexed_at, indexed_at=doc.indexed_at,
        chunks=[ChunkLine(c.idx, c.start, c.end, c.tokens, c.sha256, c.section,
                          base64.b64encode(c.vector).decode()) for c in doc.chunks])


def _write(reader: Reader, identity: Identity, out: Path) -> tuple[int, int, int]:
    """Every document `reader` sees, as one snapshot, to `out` (blocking): (documents,
    chunks, bytes written)."""
    partial = out.with_name(out.name + ".partial")
    encoder = msgspec.json.Encoder()
    docs = chunks = 0
    try:
        with reader.snapshot(), open(partial, "wb") as handle:
            handle.write(encoder.encode(Header(FORMAT, VERSION, identity.model, identity.dim,
                                               exported_at=dates.iso(dates.now()),
                                               embedding=identity.meta())) + b"\n")
            for doc in reader.stored_documents():
                handle.write(encoder.encode(_line(doc)) + b"\n")
                docs += 1
                chunks += len(doc.chunks)
            handle.write(encoder.encode(EndLine(docs, chunks)) + b"\n")
        partial.replace(out)
    except OSError as exc:
        raise StoreError(f"cannot write {out}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return docs, chunks, out.stat().st_size


def _identity(place: Place, out: Path) -> Identity:
    """What the index at `place` records of its embeddings (blocking); InvalidRequest when
    `out` is the index itself, StoreError when there is no index yet."""
    if place.holds(out):
        raise InvalidRequest("the export must go to another file than the index itself")
    identity = place.identity()
    if identity is None:
        raise StoreError(f"no index at {place.describe()}; run `pocketmcp index` first")
    return identity


async def export(place: Place, out: Path) -> ExportResult:
    """Write every document of the index at `place` (a SQLite file or a Postgres schema),
    as one snapshot, to `out`."""
    started = time.perf_counter()
    identity = await anyio.to_thread.run_sync(_identity, place, out)
    index = place.reader(identity.dim)
    try:
        docs, chunks, size = await index.run(lambda reader: _write(reader, identity, out))
    finally:
        index.close()
    return ExportResult(path=str(out), documents=docs, chunks=chunks, bytes=size,
                        elapsed_ms=round((time.perf_counter() - started) * 1000))


# -- import ------------------------------------------------------------------------------------

def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line that is not blank (blocking)."""
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, line
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc}") from None


def _header(line: bytes, path: Path) -> Header:
    try:
        header = msgspec.json.decode(line, type=Header)
    except msgspec.DecodeError:
        header = None
    if header is None or header.format != FORMAT:
        raise InvalidRequest(f"{path} is not a PocketMCP export: its first line is not the "
                             f"{FORMAT} header")
    if header.version > VERSION or header.vector != "float32-le-base64":
        raise InvalidRequest(f"{path} is export format version {header.version} "
                             f"({header.vector}); this PocketMCP reads version {VERSION}")
    return header


def _record(doc: DocLine) -> DocRecord:
    # Chunks start after a note's front matter: chunked again (another model), they still do.
    facts = DocFacts(properties=doc.properties, tags=tuple(doc.tags), links=tuple(doc.links),
                     created=doc.created, modified=doc.modified,
                     body_start=min((c.start for c in doc.chunks), default=0))
    return DocRecord(external_id=doc.external_id, source=doc.source, uri=doc.uri,
                     title=doc.title, content=doc.content, sha256=doc.sha256,
                     library=doc.library, metadata=doc.metadata, size_bytes=doc.size_bytes,
                     mtime_ns=doc.mtime_ns, facts=facts)


def _prepared(doc: DocLine, dim: int, where: str) -> PreparedDoc:
    """The document with its stored chunks and vectors, nothing embedded."""
    vectors = []
    chunks = []
    for c in doc.chunks:
        try:
            vector = base64.b64decode(c.vector, validate=True)
        except ValueError:
            vector = b""
        if len(vector) != dim * 4 or not 0 <= c.start <= c.end <= len(doc.content):
            raise InvalidRequest(f"{where}: chunk {c.idx} of {doc.external_id!r} has a vector "
                                 f"of {len(vector)} bytes (expected {dim * 4}) or offsets "
                                 "outside its content")
        vectors.append(vector)
        chunks.append(Chunk(idx=c.idx, start=c.start, end=c.end,
                            text=doc.content[c.start:c.end], tokens=c.tokens, sha256=c.sha256,
                            section=c.section))
    return PreparedDoc(_record(doc), tuple(chunks), b"".join(vectors), reused=len(chunks))


async def import_file(open_writing: Open[Writing], path: Path, *,
                      identity: Identity) -> ImportResult:
    """Write the documents of an export into the index; stored vectors are used when the
    export was made with the index's model, provider and prefixes (`identity`), else
    documents are embedded again. The file is read a few hundred lines at a time."""
    started = time.perf_counter()
    lines = _lines(path)
    first = await anyio.to_thread.run_sync(lambda: next(lines, None))
    if first is None:
        raise InvalidRequest(f"{path} is empty")
    header = _header(first[1], path)
    same_model = header.identity() == identity
    dim = identity.dim
    writing = await open_writing()
    decoder = msgspec.json.Decoder(DocLine | EndLine)
    docs = chunks = embedded = 0
    ended: EndLine | None = None
    batch: list[PreparedDoc | DocRecord] = []

    async def flush() -> None:
        nonlocal docs, chunks, embedded
        ready = [b for b in batch if isinstance(b, PreparedDoc)]
        records = [b for b in batch if isinstance(b, DocRecord)]
        if records:  # another model: chunked and embedded again
            ready += await writing.prepare.prepare(records, writing.index)
            embedded += sum(len(p.chunks) - p.reused for p in ready)
        await writing.writes.store(ready)
        docs += len(ready)
        chunks += sum(len(p.chunks) for p in ready)
        batch.clear()

    while part := await anyio.to_thread.run_sync(lambda: list(islice(lines, 256))):
        for number, line in part:
            where = f"{path}, line {number}"
            if ended is not None:
                raise InvalidRequest(f"{where}: a line after the end line")
            try:
                item = decoder.decode(line)
            except msgspec.DecodeError as exc:
                raise InvalidRequest(f"{where}: {exc}") from None
            if isinstance(item, EndLine):
                ended = item
                continue
            batch.append(_prepared(item, dim, where) if same_model else _record(item))
            if len(batch) >= IMPORT_BATCH:
                await flush()
    if batch:
        await flush()
    if ended is None or (ended.documents, ended.chunks) != (docs, chunks):
        raise InvalidRequest(f"{path} is cut short or altered: its end line is missing or "
                             f"does not match; {docs} documents were imported")
    return ImportResult(path=str(path), documents=docs, chunks=chunks, chunks_embedded=embedded,
                        same_model=same_model,
                        elapsed_ms=round((time.perf_counter() - started) * 1000))


# -- backup ------------------------------------------------------------------------------------

async def backup(place: Place, out: Path) -> BackupResult:
    """A consistent copy of the index at `place`, made while it may be written."""
    started = time.perf_counter()
    def copy() -> int:
        if place.holds(out):
            raise InvalidRequest("the backup must go to another file than the index itself")
        return place.backup(out)

    size = await anyio.to_thread.run_sync(copy)
    return BackupResult(path=str(out), bytes=size,
                        elapsed_ms=round((time.perf_counter() - started) * 1000))
