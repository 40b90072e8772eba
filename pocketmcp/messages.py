"""Facts that flow between the pipeline's actors, oldest stage first."""

from __future__ import annotations

import msgspec


class FileSeen(msgspec.Struct, frozen=True):
    """The watcher saw `rel` (a path relative to the watched folder) change or exist."""

    rel: str
    force: bool = False  # read and re-embed even if size, mtime and content are unchanged


class FileGone(msgspec.Struct, frozen=True):
    """`rel` no longer exists (or no longer qualifies) and leaves the index."""

    rel: str
    seq: int = 0


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

    @property
    def embed_text(self) -> str:
        return self.prefix + self.text


class FileChunked(msgspec.Struct, frozen=True):
    doc: FileHashed
    chunks: tuple[Chunk, ...]


class FileEmbedded(msgspec.Struct, frozen=True):
    """Every chunk of `doc` has a vector; `reused` of them came from the index itself."""

    doc: FileHashed
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


Event = FileSeen | FileGone | ScanDone
Hashed = FileHashed | FileTouched | FileGone | ScanDone
Chunked = FileChunked | FileTouched | FileGone | ScanDone
Embedded = FileEmbedded | FileTouched | FileGone | ScanDone


def external_id(rel: str) -> str:
    """The index's id of the file at `rel` (POSIX, relative to the watched folder)."""
    return "file:" + rel


def rel_of(external: str) -> str:
    return external.removeprefix("file:")
