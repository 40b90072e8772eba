"""What one file holds now, against what the index knows of it: the blocking part of the
hasher's work (a stat, a read, a digest, and for text that changed its decoding and note),
run in a worker thread for a group of files at a time."""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

import msgspec

from pocketmcp.convert import kinds
from pocketmcp.core import dates
from pocketmcp.core.notes import Note, read_note
from pocketmcp.core.text import clean, decode, looks_binary, sha256, title_of
from pocketmcp.store.rows import DocState


class Read(msgspec.Struct, frozen=True):
    size: int
    mtime_ns: int
    data: bytes | None  # None: the stat matched the index, content not read
    problem: str | None = None



def too_large(max_bytes: int) -> str:
    """Why a file over `max_bytes` is skipped, with the setting that raises the limit."""
    return f"larger than the limit of {max_bytes / 2**20:g} MB (MAX_FILE_MB)"

def read_file(path: Path, max_bytes: int, known: DocState | None, force: bool,
              kind: str | None) -> Read | None:
    """Stat and read one file (blocking). None when it is not a regular file any more.

    `kind` is the file's format by name (None: unknown, read if its content is text)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > max_bytes:
        return Read(st.st_size, st.st_mtime_ns, None,
                    too_large(max_bytes))
    if not force and known is not None and (known.size, known.mtime_ns) == (
        st.st_size, st.st_mtime_ns
    ):
        return Read(st.st_size, st.st_mtime_ns, None)
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        return Read(len(data), st.st_mtime_ns, None,
                    too_large(max_bytes))
    if kind not in kinds.CONVERTED and looks_binary(data):
        problem = "binary content" if kind else kinds.refused_binary(path.name)
        return Read(len(data), st.st_mtime_ns, None, problem)
    return Read(len(data), st.st_mtime_ns, data)


class Text(msgspec.Struct, frozen=True):
    """A text file read and found changed: its digest, text and what it says of itself."""

    sha256: str
    text: str
    exact: bool  # decoded without replacement
    note: Note | None  # None: the index holds this very content (not worked out)
    title: str = ""
    uri: str = ""


class Looked(msgspec.Struct, frozen=True):
    """One file as the index knows it and as it is on disk, worked out in a worker thread
    with the rest of its group (the event loop is shared with searches)."""

    known: DocState | None
    read: Read | None
    force: bool  # written again whatever its digest (asked, or its library changed)
    text: Text | None = None
    failure: OSError | None = None  # the file could not be read


def look_at(rel: str, path: Path, max_bytes: int, known: DocState | None, force: bool,
            kind: str | None, unsupported: str | None, seen: bool) -> Looked:
    """Stat, read and hash one file and, if it is text that changed, decode it and read its
    note (blocking). `force`: written again whatever its digest, as the hasher decides it
    given `known`."""
    if not seen:
        return Looked(known, None, force)
    read = Read(0, 0, None, unsupported) if unsupported else read_file(
        path, max_bytes, known, force, kind)
    if read is None or read.problem is not None or read.data is None:
        return Looked(known, read, force)
    digest = sha256(read.data)
    if (known is not None and known.sha256 == digest and not force) or (
            kind in kinds.CONVERTED):
        return Looked(known, read, force, Text(digest, "", True, None))
    text, exact = decode(read.data)
    text = clean(text)
    note = read_note(text, folder=posixpath.dirname(rel), modified=dates.from_ns(read.mtime_ns))
    return Looked(known, read, force, Text(digest, text, exact, note,
                                     note.title or title_of(text, Path(rel).stem),
                                     path.as_uri()))


class Ask(msgspec.Struct, frozen=True):
    """What the hasher asks of one file in a group, worked out on the event loop."""

    rel: str
    seen: bool  # a FileSeen (else a FileGone)
    unsupported: str | None  # why its name is refused, if it is
    forced: bool
    library: str
    kind: str | None
    stored: bool  # not in flight: the index knows its state
    known: DocState | None  # in flight: the state it will have
