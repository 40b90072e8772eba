"""Facts that flow to the writer of an index, oldest stage first.

File changes travel watcher -> hasher -> chunker -> embedder -> writer. Tool requests join
them at the writer's inbox, each carrying a one-shot reply stream that the writer answers
after its commit. Everything here is a frozen msgspec Struct; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

# -- a file's journey --------------------------------------------------------------------------

class FileSeen(msgspec.Struct, frozen=True):
    """The watcher saw `rel` (a path relative to the watched folder) change or exist."""

    rel: str
    force: bool = False  # read and re-embed even if size, mtime and content are unchanged


class FileGone(msgspec.Struct, frozen=True):
    """`rel` no longer exists (or no longer qualifies) and leaves the index."""

    rel: str
    seq: int = 0
    skipped: bool = False  # it is still there but no longer indexable: counted as skipped


class Link(msgspec.Struct, frozen=True):
    """A link from one document to another, as written and as a key to resolve it by."""

    target: str  # as written: "Note", "folder/Note", "../other.md"
    key: str  # the target's name as documents are named (core/notes.py: doc_keys)
    kind: Literal["wiki", "markdown"]


class DocFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a document says about itself: front matter or document properties, tags,
    links, and its own dates (UTC ISO strings, core/dates.py)."""

    properties: dict[str, Any] = {}
    tags: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()
    created: str | None = None
    modified: str | None = None
    body_start: int = 0  # where the text after the front matter starts: chunks start there


class FileHashed(msgspec.Struct, frozen=True):
    """`rel` was read and its content differs from what the index holds."""

    rel: str
    seq: int
    uri: str
    title: str
    text: str
    sha256: str
    size: int
    mtime_ns: int
    library: str = "default"
    facts: DocFacts = msgspec.field(default_factory=DocFacts)
    edit: bool = False  # the index held another version: its vectors jump the queue


class FileTouched(msgspec.Struct, frozen=True):
    """`rel` has new size or mtime but the same content: only its stat is recorded."""

    rel: str
    size: int
    mtime_ns: int


class Chunk(msgspec.Struct, frozen=True):
    idx: int
    start: int
    end: int
    text: str
    tokens: int  # of prefix + text, special tokens included
    sha256: str  # of prefix + text: equal digests share a vector
    section: str = ""  # heading path, "Title > Section"
    prefix: str = ""  # put before the text when embedding
    indexed: str = ""  # the text as embedded and indexed for keywords, when not `text`

    @property
    def embed_text(self) -> str:
        return self.prefix + (self.indexed or self.text)

    @property
    def keyword_text(self) -> str:
        return self.indexed or self.text


class FileChunked(msgspec.Struct, frozen=True):
    doc: FileHashed
    chunks: tuple[Chunk, ...]


class VectorsFound(msgspec.Struct, frozen=True):
    """The vectors of a document whose chunks waited for them (written for keyword search
    first), for its text `sha256`."""

    doc_id: int
    external_id: str
    sha256: str
    chunks: tuple[Chunk, ...]
    vectors: bytes  # float32, len(chunks) x dim, row-major
    reused: int
    embed_ms: float


class ScanDone(msgspec.Struct, frozen=True):
    """In-band marker: everything a scan found has passed this point.

    Token 0 is the initial scan; a rescan asked for later carries its own token.
    """

    files: int
    token: int = 0


# -- documents as the writer stores them -------------------------------------------------------

class DocRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One document, as a row of the index."""

    external_id: str
    source: Literal["file", "url", "raw"]
    uri: str | None
    title: str
    content: str
    sha256: str
    library: str = "default"
    metadata: dict[str, Any] = {}
    size_bytes: int | None = None
    mtime_ns: int | None = None
    facts: DocFacts = msgspec.field(default_factory=DocFacts)


class PreparedDoc(msgspec.Struct, frozen=True):
    """A document cut into chunks, each with its vector, ready to be written."""

    record: DocRecord
    chunks: Sequence[Chunk]  # a tuple, or an import's chunks made when read (ops/archive.py)
    vectors: bytes  # float32, len(chunks) x dim, row-major
    reused: int = 0  # vectors taken from the index instead of the model
    waiting: bool = False  # no vectors yet: written for keywords, embedded once written


class Written(msgspec.Struct, frozen=True):
    doc_id: int
    status: Literal["inserted", "updated", "unchanged"]
    chunks: int
    chunks_removed: int
    waiting: int = 0  # chunks written for keywords, waiting for their vectors


class Removed(msgspec.Struct, frozen=True):
    """What a deletion took out: one entry per document found, and the ids found nowhere."""

    doc_ids: tuple[int, ...]
    chunks: int
    not_found: tuple[str, ...]


# -- tool requests: answered on `reply` after their commit -------------------------------------

class DocsSubmitted(msgspec.Struct, frozen=True):
    """A tool asked for these documents to be written, all or none."""

    docs: tuple[PreparedDoc, ...]
    reply: Any  # a one-shot MemoryObjectSendStream[list[Written] | Exception]


class RemovalAsked(msgspec.Struct, frozen=True):
    """A tool asked for documents to be removed, by doc_id and by external id."""

    doc_ids: tuple[int, ...]
    external_ids: tuple[str, ...]
    reply: Any  # a one-shot MemoryObjectSendStream[Removed | Exception]


Request = DocsSubmitted | RemovalAsked

Event = FileSeen | FileGone | ScanDone
Hashed = FileHashed | FileTouched | FileGone | ScanDone
Chunked = FileChunked | FileTouched | FileGone | ScanDone
ToWriter = (FileChunked | FileTouched | FileGone | ScanDone | VectorsFound | DocsSubmitted
            | RemovalAsked)
