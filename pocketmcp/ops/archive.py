"""Export, import and backup of an index.

The export format (`pocketmcp export FILE`) is JSON Lines, UTF-8, one object a line:

1. a header: `{"format": "pocketmcp-export", "version": 1, "model_id": ..., "dim": 384,
   "vector": "float32-le-base64", "exported_at": ...}`;
2. one line per document: `{"type": "document", "external_id", "source", "uri", "title",
   "library", "metadata", "properties", "tags", "created", "modified", "links":
   [{"target", "key", "kind"}], "content", "sha256", "size_bytes", "mtime_ns",
   "first_indexed_at", "indexed_at", "chunks": [{"idx", "start", "end", "tokens", "sha256",
   "section", "vector"}]}`, where a chunk's text is `content[start:end]` and `vector` is its
   embedding as little-endian float32, base64, or null for a chunk written for keyword
   search that still waits for its vector;
3. a trailer: `{"type": "end", "documents": N, "chunks": M, "waiting": W}` (W of the M
   chunks without a vector; older files leave it out: none), so a cut-off file is noticed.

`pocketmcp import FILE` is all or nothing. Every line is read with a cap (twice MAX_FILE_MB
and the most chunks' vectors: a line that never ends is refused, not read into memory) and
checked before anything changes: the header, each document's ids (no control characters;
`file:` paths relative without `..`; `path:` paths inside WATCH_DIR or ALLOWED_ROOTS),
library, values (integers within 64 bits, dates), size (MAX_FILE_MB and the most chunks a
document makes, as indexing), its SHA-256 (64 hex digits), each chunk's offsets and digest
(of its text), the chunks' coverage of the text (white space alone between and around them),
vector sizes and finite values, and the end line's counts (documents, chunks, chunks without
a vector); the first problem is refused (IMPORT_REFUSED) with its line number. The
documents are then written through the index's writer in one transaction, so an import
interrupted at any point (a signal, a full disk, a killed process) leaves the index as it
was. The file's documents are held in memory until that transaction, each one's text once
(the line is let go once decoded; its chunks cut their texts when the writer takes them, one
at a time): a document's peak is about three times its line, with SQLite's copy of the text
and the row it builds (bench/import_memory.py). When the
file's model is the index's, the stored vectors are used and nothing is embedded;
otherwise each document is chunked and embedded again, IMPORT_BATCH documents at a time,
before the transaction. A document with a chunk that has no vector is written as
keyword indexing writes one: searchable by its keywords at once, its chunks waiting (those
whose text the index holds with a vector take that one), embedded by a running server or the
next `pocketmcp index`.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import overload

import anyio
import msgspec

from pocketmcp import private
from pocketmcp.core import dates
from pocketmcp.core.identity import Identity
from pocketmcp.core.safe import safe_text
from pocketmcp.errors import ImportRefused, InvalidRequest, StoreError
from pocketmcp.messages import Chunk, DocFacts, DocRecord, PreparedDoc
from pocketmcp.ops import archive_check as checks
from pocketmcp.ops.archive_format import (
    FORMAT,
    IMPORT_BATCH,
    VERSION,
    ChunkLine,
    DocLine,
    EndLine,
    Header,
)
from pocketmcp.ops.results import BackupResult, ExportResult, ImportResult
from pocketmcp.plans import Open, Writing
from pocketmcp.store import archive
from pocketmcp.store.api import Archive, Place

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
                          None if c.vector is None else base64.b64encode(c.vector).decode())
                for c in doc.chunks])


def _write(reader: Archive, identity: Identity, out: Path) -> tuple[int, int, int, int]:
    """Every document `reader` sees, as one snapshot, to `out` (blocking): (documents,
    chunks, chunks waiting for their vectors, bytes written)."""
    partial = out.with_name(out.name + ".partial")
    encoder = msgspec.json.Encoder()
    docs = chunks = waiting = 0
    try:
        partial.unlink(missing_ok=True)
        private.new_file(partial)  # the documents' text: 0600, as the index's own files
        with reader.snapshot(), open(partial, "wb") as handle:
            handle.write(encoder.encode(Header(FORMAT, VERSION, identity.model, identity.dim,
                                               exported_at=dates.iso(dates.now()),
                                               embedding=identity.meta())) + b"\n")
            for doc in reader.stored_documents():
                handle.write(encoder.encode(_line(doc)) + b"\n")
                docs += 1
                chunks += len(doc.chunks)
                waiting += sum(1 for c in doc.chunks if c.vector is None)
            handle.write(encoder.encode(EndLine(docs, chunks, waiting)) + b"\n")
        partial.replace(out)
    except OSError as exc:
        raise StoreError(f"cannot write {out}: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return docs, chunks, waiting, out.stat().st_size


def _identity(place: Place, out: Path) -> Identity:
    """What the index at `place` records of its embeddings (blocking); InvalidRequest when
    `out` is the index itself, StoreError when there is no index yet."""
    if place.holds(out):
        raise InvalidRequest("the export must go to another file than the index's own")
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
        docs, chunks, waiting, size = await index.run(
            lambda reader: _write(reader, identity, out))
    finally:
        index.close()
    return ExportResult(path=str(out), documents=docs, chunks=chunks, chunks_waiting=waiting,
                        bytes=size, elapsed_ms=round((time.perf_counter() - started) * 1000))


# -- import ------------------------------------------------------------------------------------

def _record(doc: DocLine) -> DocRecord:
    # Chunks start after a note's front matter: chunked again (another model), they still do.
    facts = DocFacts(properties=doc.properties, tags=tuple(doc.tags), links=tuple(doc.links),
                     created=doc.created, modified=doc.modified,
                     body_start=min((c.start for c in doc.chunks), default=0))
    return DocRecord(external_id=doc.external_id, source=doc.source, uri=doc.uri,
                     title=doc.title, content=doc.content, sha256=doc.sha256,
                     library=doc.library, metadata=doc.metadata, size_bytes=doc.size_bytes,
                     mtime_ns=doc.mtime_ns, facts=facts)


class _Chunks(Sequence[Chunk]):
    """A document's stored chunks, each made when it is read, its text cut from the
    document's then: the writer takes them a row at a time, so an import holds one chunk's
    text at a time beside the document's, not a second copy of the whole."""

    def __init__(self, content: str, chunks: list[ChunkLine]) -> None:
        self._content = content
        self._chunks = chunks

    def __len__(self) -> int:
        return len(self._chunks)

    def _chunk(self, c: ChunkLine) -> Chunk:
        return Chunk(idx=c.idx, start=c.start, end=c.end, text=self._content[c.start:c.end],
                     tokens=c.tokens, sha256=c.sha256, section=c.section)

    @overload
    def __getitem__(self, at: int) -> Chunk: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, at: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(at, slice):
            return _Chunks(self._content, self._chunks[at])
        return self._chunk(self._chunks[at])

    def __iter__(self) -> Iterator[Chunk]:
        return (self._chunk(c) for c in self._chunks)


def _prepared(doc: DocLine, vectors: list[bytes | None]) -> PreparedDoc:
    """The document with its stored chunks and vectors, nothing embedded; when a chunk has
    no vector, the document is written waiting for them."""
    chunks = _Chunks(doc.content, doc.chunks)
    known = [v for v in vectors if v is not None]
    if len(known) < len(vectors):
        return PreparedDoc(_record(doc), chunks, b"", waiting=True)
    return PreparedDoc(_record(doc), chunks, b"".join(known), reused=len(chunks))


def _read(path: Path, identity: Identity, roots: tuple[Path, ...], limits: tuple[int, int]
          ) -> tuple[bool, list[PreparedDoc | DocRecord]]:
    """Every line of the export checked (blocking): (same model, its documents).
    ImportRefused names the first line that cannot be imported."""
    numbered = checks.Lines(path)
    try:
        return _check_all(numbered, identity, roots, *limits)
    finally:
        numbered.close()


def check(path: Path, roots: tuple[Path, ...], limits: tuple[int, int]) -> None:
    """Every line of the export checked as an import checks it, whatever the index's model,
    nothing kept (blocking): before an index is made to take it, a file refused makes none."""
    numbered = checks.Lines(path)
    try:
        _check_all(numbered, None, roots, *limits, keep=False)
    finally:
        numbered.close()


def _check_all(numbered: checks.Lines, identity: Identity | None, roots: tuple[Path, ...],
               max_bytes: int, most_chunks: int, *, keep: bool = True
               ) -> tuple[bool, list[PreparedDoc | DocRecord]]:
    path = numbered.path
    first = numbered.next(checks.HEADER_CAP)
    if first is None:
        raise ImportRefused(f"{path} is empty; nothing was imported")
    header = checks.header(first, path, numbered.number)
    same_model = header.identity() == identity
    cap = checks.line_cap(max_bytes, header.dim, most_chunks)
    decoder = msgspec.json.Decoder(DocLine | EndLine)
    docs: list[PreparedDoc | DocRecord] = []
    ids: set[str] = set()
    chunks = waiting = 0
    ended: EndLine | None = None
    while (line := numbered.next(cap)) is not None:
        number = numbered.number
        try:
            if ended is not None:
                raise checks.Bad("a line after the end line")
            item = checks.decode(decoder, line)
            del line  # the document alone is kept, its text once
            if isinstance(item, EndLine):
                ended = item
                continue
            vectors = checks.document(item, header.dim, roots, max_bytes=max_bytes,
                                      most_chunks=most_chunks)
            if item.external_id in ids:
                raise checks.Bad(f"document {safe_text(item.external_id[:80])!r} comes twice")
        except checks.Bad as exc:
            raise ImportRefused(f"{path}, line {number}: {exc}; nothing was imported",
                                number) from None
        ids.add(item.external_id)
        if keep:
            docs.append(_prepared(item, vectors) if same_model else _record(item))
        chunks += len(item.chunks)
        waiting += vectors.count(None)
    if ended is None or (ended.documents, ended.chunks, ended.waiting) != (
            len(ids), chunks, waiting):
        raise ImportRefused(
            f"{path} is cut short or altered: its end line is missing or does not match "
            f"({len(ids)} documents and {chunks} chunks read, {waiting} of them without a "
            "vector); nothing was imported", numbered.number)
    if identity is not None and same_model and header.dim != identity.dim:
        raise ImportRefused(f"{path}: its vectors have {header.dim} dimensions, the index's "
                            f"{identity.dim}; nothing was imported", 1)
    return same_model, docs


async def import_file(open_writing: Open[Writing], path: Path, *, identity: Identity,
                      roots: tuple[Path, ...] = (), max_bytes: int = 20 * 2**20,
                      most_chunks: int = 1000) -> ImportResult:
    """Write the documents of an export into the index, all or nothing: every line is
    checked first (ids, paths, values, offsets, vectors, the end line's counts), then the
    documents are written in one transaction. Stored vectors are used when the export was
    made with the index's model, provider and prefixes (`identity`), else documents are
    embedded again (before the transaction). Chunks exported without a vector are written
    waiting for theirs, keyword-searchable at once. Ingested files (`path:` ids) are accepted only
    inside `roots`; a document over `max_bytes` (MAX_FILE_MB) or with more than
    `most_chunks` chunks is refused, as indexing refuses it (the defaults: the settings')."""
    started = time.perf_counter()
    same_model, items = await anyio.to_thread.run_sync(_read, path, identity, roots,
                                                       (max_bytes, most_chunks))
    writing = await open_writing()
    ready = [i for i in items if isinstance(i, PreparedDoc)]
    records = [i for i in items if isinstance(i, DocRecord)]
    embedded = 0
    for at in range(0, len(records), IMPORT_BATCH):  # another model: embedded again
        done = await writing.prepare.prepare(records[at:at + IMPORT_BATCH], writing.index)
        embedded += sum(len(p.chunks) - p.reused for p in done)
        ready += done
    written = await writing.writes.store(ready) if ready else []
    return ImportResult(path=str(path), documents=len(ready),
                        chunks=sum(len(p.chunks) for p in ready), chunks_embedded=embedded,
                        chunks_waiting=sum(w.waiting for w in written), same_model=same_model,
                        elapsed_ms=round((time.perf_counter() - started) * 1000))


# -- backup ------------------------------------------------------------------------------------

async def backup(place: Place, out: Path) -> BackupResult:
    """A consistent copy of the index at `place`, made while it may be written."""
    started = time.perf_counter()
    def copy() -> int:
        if place.holds(out):
            raise InvalidRequest("the backup must go to another file than the index's own")
        return place.backup(out)

    size = await anyio.to_thread.run_sync(copy)
    return BackupResult(path=str(out), bytes=size,
                        elapsed_ms=round((time.perf_counter() - started) * 1000))
