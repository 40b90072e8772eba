"""Every line of an export file checked before an import changes anything (blocking, pure
but for reading the file): the header, each document's ids, paths, library, values, size,
hashes, chunk offsets, coverage and vectors, and the end line's counts. Each line is read
with a cap (`Lines`), so a file whose line never ends is refused, not read into memory. The
first problem is an ImportRefused that names its line."""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec
import numpy as np

from pocketmcp.core import dates
from pocketmcp.core.chunking import stored_chunk
from pocketmcp.core.notes import split_front_matter
from pocketmcp.core.safe import safe_text
from pocketmcp.core.text import sha256
from pocketmcp.errors import ImportRefused, InvalidRequest
from pocketmcp.ops.archive_format import FORMAT, VERSION, DocLine, EndLine, Header
from pocketmcp.ops.checks import check_library

MAX_ID = 4_096  # characters of an external id or a uri
MAX_DEPTH = 32  # nesting of metadata and properties
MAX_DIM = 65_536
INT64 = (-(2**63), 2**63 - 1)
HEADER_CAP = 2**20  # bytes of the header line
_DIGEST = re.compile(r"[0-9a-f]{64}")
_BLANK = re.compile(r"\s*")


class Bad(Exception):
    """What is wrong with one line; the caller adds the file and line number."""


def line_cap(max_bytes: int, dim: int, most_chunks: int) -> int:
    """The longest document line an import reads: a text of MAX_FILE_MB (`max_bytes`),
    twice over for JSON's escapes, and `most_chunks` chunks with their base64 vectors."""
    return 2 * max_bytes + most_chunks * (dim * 16 // 3 + 1024) + 2**20


class Lines:
    """The lines of an export file that are not blank, each read with a cap: a longer line
    (or one that never ends, as /dev/zero's) is refused once the cap is passed. Nothing
    keeps a line once it is handed out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.number = 0
        try:
            self._handle = open(path, "rb")  # noqa: SIM115  # closed by close()
        except OSError as exc:
            raise ImportRefused(f"cannot read {path}: {exc}") from None

    def next(self, cap: int) -> bytes | None:
        """The next line that is not blank, at most `cap` bytes; None at the end."""
        while True:
            try:
                line = self._handle.readline(cap + 1)
            except OSError as exc:
                raise ImportRefused(f"cannot read {self.path}: {exc}") from None
            if not line:
                return None
            self.number += 1
            if len(line) > cap:
                raise ImportRefused(
                    f"{self.path}, line {self.number}: longer than {cap} bytes, the most a "
                    "line of an export holds at this MAX_FILE_MB; nothing was imported",
                    self.number)
            if not line.isspace():
                return line

    def close(self) -> None:
        self._handle.close()


def header(line: bytes, path: Path, number: int) -> Header:
    try:
        loose = msgspec.json.decode(line)
    except msgspec.DecodeError:
        loose = None
    if not isinstance(loose, dict) or loose.get("format") != FORMAT:
        raise ImportRefused(f"{path} is not a PocketMCP export: its first line is not the "
                            f"{FORMAT} header", number)
    version = loose.get("version")
    if isinstance(version, int) and version > VERSION:  # whatever else a later one holds
        raise ImportRefused(f"{path} is export format version {version}; this PocketMCP "
                            f"reads version {VERSION}", number)
    try:
        found = msgspec.json.decode(line, type=Header)
    except msgspec.DecodeError as exc:
        raise ImportRefused(f"{path}, line {number}: the {FORMAT} header does not hold "
                            f"what it must: {exc}", number) from None
    if found.version > VERSION or found.vector != "float32-le-base64":
        raise ImportRefused(f"{path} is export format version {found.version} "
                            f"({found.vector}); this PocketMCP reads version {VERSION}", number)
    if not 1 <= found.dim <= MAX_DIM:
        raise ImportRefused(f"{path}, line {number}: dim {found.dim} is not a vector size "
                            f"(1 to {MAX_DIM})", number)
    return found


def _controls(text: str) -> bool:
    return any(unicodedata.category(c) == "Cc" for c in text)


def _name(value: str | None, what: str, *, limit: int = MAX_ID) -> None:
    """An id, path, uri or library: no control characters (NUL included), not too long."""
    if value is None:
        return
    if not value or len(value) > limit or _controls(value):
        raise Bad(f"{what} {safe_text(value[:80])!r} is empty, longer than {limit} "
                  "characters, or holds control characters")


def _no_nul(value: str, what: str) -> None:
    if "\x00" in value:
        raise Bad(f"{what} holds a NUL character")


def _relative(rel: str, what: str) -> None:
    """A path inside the watched folder: relative, without `.` or `..` parts."""
    parts = PurePosixPath(rel).parts
    if (not rel or rel.startswith("/") or "\\" in rel or posixpath.normpath(rel) != rel
            or any(p in (".", "..") for p in parts)):
        raise Bad(f"{what} {safe_text(rel[:80])!r} is not a relative path inside the folder "
                  "(no leading /, no . or .. parts)")


def _inside(absolute: str, roots: tuple[Path, ...], what: str) -> None:
    """An ingested file's path: absolute, normalised, inside one of the allowed folders."""
    if not absolute.startswith("/") or posixpath.normpath(absolute) != absolute:
        raise Bad(f"{what} {safe_text(absolute[:80])!r} is not an absolute, normalised path")
    if not any(Path(absolute).is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots) or "none"
        raise Bad(f"{what} {safe_text(absolute[:80])!r} is outside the index's folders "
                  f"({allowed}); add its folder to ALLOWED_ROOTS to import it")


def _identity(doc: DocLine, roots: tuple[Path, ...]) -> None:
    ext = doc.external_id
    _name(ext, "external_id")
    _name(doc.library, "library", limit=100)
    try:
        if check_library(doc.library, "") != doc.library:
            raise Bad(f"library {safe_text(doc.library)!r} is not written as stored")
    except InvalidRequest as exc:
        raise Bad(str(exc)) from None
    _name(doc.uri, "uri")
    is_file = ext.startswith(("file:", "path:"))
    if (doc.source == "file") != is_file:
        raise Bad(f"external_id {safe_text(ext[:80])!r} does not fit source {doc.source!r} "
                  "(files are named file:PATH or path:LIBRARY:PATH, other documents not)")
    if ext.startswith("file:"):
        _relative(ext.removeprefix("file:"), "path")
    elif ext.startswith("path:"):
        parts = ext.split(":", 2)
        if len(parts) != 3 or parts[1] != doc.library:
            raise Bad(f"external_id {safe_text(ext[:80])!r} is not path:LIBRARY:PATH with "
                      "the document's library")
        _inside(parts[2], roots, "path")


def _value(value: Any, where: str, depth: int = 0) -> None:
    """Metadata and properties: JSON that every store holds as it is."""
    if depth > MAX_DEPTH:
        raise Bad(f"{where} is nested deeper than {MAX_DEPTH}")
    if isinstance(value, str):
        _no_nul(value, where)
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        pass
    elif isinstance(value, int):
        if not INT64[0] <= value <= INT64[1]:
            raise Bad(f"{where} holds {value}, beyond the 64-bit integers an index keeps")
    elif isinstance(value, list):
        for item in value:
            _value(item, where, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, where)
            _value(item, where, depth + 1)


def _count(value: int | None, what: str) -> None:
    if value is not None and not 0 <= value <= INT64[1]:
        raise Bad(f"{what} {value} is outside 0 to 2^63-1")


def chunk_digest(text: str, section: str) -> str:
    """The digest a chunk of `text` in `section` has: of the text it is embedded as."""
    return sha256(stored_chunk(0, 0, len(text), text, 0, "", section).embed_text)


def _size(doc: DocLine, max_bytes: int, most_chunks: int) -> None:
    """The limits indexing holds a document to: MAX_FILE_MB, and the chunks one document
    makes."""
    if doc.size_bytes is not None and doc.size_bytes > max_bytes:
        raise Bad(f"size_bytes {doc.size_bytes} is over MAX_FILE_MB ({max_bytes} bytes), the "
                  "most indexing takes")
    if len(doc.content) > max_bytes:
        raise Bad(f"its content is over MAX_FILE_MB ({max_bytes} bytes), the most indexing "
                  "takes")
    if len(doc.chunks) > most_chunks:
        raise Bad(f"it has {len(doc.chunks)} chunks, more than the {most_chunks} one document "
                  "makes")
    if not _DIGEST.fullmatch(doc.sha256):
        raise Bad(f"sha256 {safe_text(doc.sha256[:80])!r} is not a SHA-256 digest (64 "
                  "lower-case hexadecimal digits)")


def _blank(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] is white space (without copying it)."""
    return start >= end or _BLANK.match(text, start, end).end() == end  # type: ignore[union-attr]


def _covered(doc: DocLine, most_chunks: int) -> None:
    """The chunks cover the document: nothing but white space before the first (after a
    front matter block), between them or after the last (unless the document was cut at the
    most chunks one document makes)."""
    text = doc.content
    spans = sorted((c.start, c.end) for c in doc.chunks)
    first = spans[0][0] if spans else len(text)
    if not _blank(text, 0, first) and not _blank(text, split_front_matter(text)[1], first):
        raise Bad(f"characters 0-{first} of its content are in no chunk")
    reached = first
    for start, end in spans:
        if not _blank(text, reached, start):
            raise Bad(f"characters {reached}-{start} of its content are in no chunk")
        reached = max(reached, end)
    if len(spans) < most_chunks and not _blank(text, reached, len(text)):
        raise Bad(f"characters {reached}-{len(text)} of its content are in no chunk")


def document(doc: DocLine, dim: int, roots: tuple[Path, ...], *, max_bytes: int,
             most_chunks: int) -> list[bytes | None]:
    """Check one document; its chunks' vectors, decoded (float32, little-endian), None for
    a chunk that waits for its vector."""
    _size(doc, max_bytes, most_chunks)
    _identity(doc, roots)
    for what, text in (("title", doc.title), ("content", doc.content), ("sha256", doc.sha256)):
        _no_nul(text, what)
    for tag in doc.tags:
        _name(tag, "tag", limit=200)
    for link in doc.links:
        _no_nul(link.target + link.key, "a link")
    _value(doc.metadata, "metadata")
    _value(doc.properties, "properties")
    for what, when in (("created", doc.created), ("modified", doc.modified)):
        if when is not None and dates.normalise(when) is None:
            raise Bad(f"{what} {safe_text(when[:40])!r} is not a date (ISO 8601, years 1-9999)")
    _count(doc.size_bytes, "size_bytes")
    _count(doc.mtime_ns, "mtime_ns")
    vectors: list[bytes | None] = []
    seen: set[int] = set()
    for chunk in doc.chunks:
        name = f"chunk {chunk.idx}"
        if chunk.idx in seen or not 0 <= chunk.idx < 2**31:
            raise Bad(f"{name} is numbered twice or out of range")
        seen.add(chunk.idx)
        if not 0 <= chunk.start <= chunk.end <= len(doc.content):
            raise Bad(f"{name} has offsets {chunk.start}-{chunk.end} outside its content "
                      f"of {len(doc.content)} characters")
        if not 0 <= chunk.tokens < 2**31:
            raise Bad(f"{name} has {chunk.tokens} tokens")
        _no_nul(chunk.section, name)
        if chunk_digest(doc.content[chunk.start:chunk.end], chunk.section) != chunk.sha256:
            raise Bad(f"{name}'s sha256 is not the digest of its text")
        if chunk.vector is None:  # written for keywords: embedded once imported
            vectors.append(None)
            continue
        try:
            vector = base64.b64decode(chunk.vector, validate=True)
        except (ValueError, binascii.Error):
            raise Bad(f"{name}'s vector is not base64") from None
        if len(vector) != dim * 4:
            raise Bad(f"{name}'s vector has {len(vector)} bytes; the file's vectors have "
                      f"{dim} dimensions ({dim * 4} bytes)")
        if not np.isfinite(np.frombuffer(vector, "<f4")).all():
            raise Bad(f"{name}'s vector holds NaN or infinite values")
        vectors.append(vector)
    _covered(doc, most_chunks)
    return vectors


def decode(decoder: msgspec.json.Decoder[DocLine | EndLine], line: bytes) -> DocLine | EndLine:
    try:
        item: DocLine | EndLine = decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise Bad(str(exc)) from None
    return item
