"""The vector file: every chunk vector of an index in a file beside it (`index.db.vectors`),
memory-mapped, so opening an index of any size costs milliseconds and the OS page cache, not
the process heap, holds the vectors.

Format (little-endian; every region starts on a 4096-byte boundary):

    header    magic "PMCPVEC1", format version, dim, capacity (rows the columns hold),
              generation (random, new for every file written), the database's token (a
              random id the database keeps in `meta`, so a file never passes for another
              database's), mean_n (rows the mean was taken over), CRC-32 of all that and
              the mean. Written once, when the file is made; never changed in place.
    mean      float32[dim]: the centre of the 1-bit codes.
    slots     two state slots of 64 bytes: counter (newest wins), rows (rows written),
              seq (the chunk_log sequence number the rows reflect), live rows, the last
              row's chunk id, the log entry at seq (chunk id, added), CRC-32.
    ids       int64[capacity]  chunk ids, in the order their vectors came (ascending but
              where a chunk got its vector after later chunks: it keeps the id it had
              while it waited; a file written anew is in id order again)
    docs      int64[capacity]  doc ids
    alive     uint8[capacity]  0 once the chunk is removed
    codes     uint64[ceil(dim / 64)][capacity]  1-bit codes, bit-sliced (word w of every row
              together), for the Hamming pass (vectors/scan.py)
    f16       float16[capacity][dim]  the vectors, for rescoring

Protocol. Only the process holding the index's writer lock writes the file, from its writer
thread, right after each commit (vectors/writer.py), with pwrite (a full disk is an error,
never a fault in a mapping): it appends the rows the chunk_log says were added (past `rows`,
where no reader looks), flips the alive bytes of removed chunks, then writes the older of the
two slots with the new row count and seq. A slot is written last and
carries its own checksum, so a crash (kill -9 included) at any point leaves the newest valid
slot describing rows that are all there: the file is never wrong, only behind the log, and
replaying the log from the slot's seq brings it up to date (its appends write the rows past
the slot's again; removals are idempotent). A chunk id is added once and removed once (ids
are never reused), so a removed chunk's row is found by a binary search where the ids
around it ascend, else by one pass over the ids (`rows_of`). Alive bytes flipped ahead of
the slot are harmless: they belong to removals already committed. A file that cannot be
brought up to date that way (missing, damaged, another database's, ahead of the database,
or behind what the trimmed log still holds) is rebuilt from SQLite in the background into a
new file, in id order, which is synced and renamed into place; readers notice the new inode
and map it. Readers map the file read-only and follow the log past the slot themselves
(vectors/index.py), so they see every commit at once and never write.
"""

from __future__ import annotations

import mmap
import os
import secrets
import struct
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pocketmcp.errors import VectorFileError
from pocketmcp.store.sqlite.files import VECTORS
from pocketmcp.store.sqlite.log import ChunkLog
from pocketmcp.store.sqlite.vectors.rowcodes import RowCodes
from pocketmcp.store.sqlite.vectors.scan import encode, words

MAGIC = b"PMCPVEC1"
VERSION = 1
PAGE = 4096
_HEAD = struct.Struct("<8sIIQQ16sQ")  # magic, version, dim, capacity, generation, token, mean_n
_HEAD_CRC = 64  # offset of the header's CRC-32
_SLOT = struct.Struct("<QQQQqqq")  # counter, rows, seq, live, last_id, log_chunk, log_added
_SLOT_SIZE = 64


def vectors_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + VECTORS)


def _up(n: int) -> int:
    return (n + PAGE - 1) // PAGE * PAGE


class State(NamedTuple):
    """What one slot says: rows [0, rows) reflect the chunk_log up to `seq`."""

    counter: int
    rows: int
    seq: int
    live: int
    last_id: int
    log_chunk: int  # the log entry at `seq` (-1 when seq is 0), to tell histories apart
    log_added: int


EMPTY = State(0, 0, 0, 0, 0, -1, 0)


class Layout(NamedTuple):
    dim: int
    capacity: int
    mean: int
    slots: int
    ids: int
    docs: int
    alive: int
    codes: int
    f16: int
    size: int

    @classmethod
    def of(cls, dim: int, capacity: int) -> Layout:
        mean = PAGE
        slots = mean + _up(dim * 4)
        ids = slots + PAGE
        docs = ids + _up(capacity * 8)
        alive = docs + _up(capacity * 8)
        codes = alive + _up(capacity)
        f16 = codes + _up(capacity * words(dim) * 8)
        return cls(dim, capacity, mean, slots, ids, docs, alive, codes, f16,
                   f16 + _up(capacity * dim * 2))


class Header(NamedTuple):
    dim: int
    capacity: int
    generation: int
    token: bytes
    mean_n: int


class Columns:
    """The columns of one vector file as numpy views of its (read-only) mapping; with `fd`,
    the writer's handle that changes it."""

    def __init__(self, mm: mmap.mmap, header: Header, path: Path, inode: int,
                 fd: int | None = None, staging: Path | None = None) -> None:
        self.mm = mm
        self.fd = fd
        self.staging = staging  # where a new file is written before `install` renames it
        self.header = header
        self.path = path
        self.inode = inode
        self.dim = header.dim
        self.capacity = cap = header.capacity
        lay = self.layout = Layout.of(header.dim, cap)
        self.mean: npt.NDArray[np.float32] = np.frombuffer(mm, np.float32, self.dim, lay.mean)
        self.ids: npt.NDArray[np.int64] = np.frombuffer(mm, np.int64, cap, lay.ids)
        self.docs: npt.NDArray[np.int64] = np.frombuffer(mm, np.int64, cap, lay.docs)
        self.alive: npt.NDArray[np.uint8] = np.frombuffer(mm, np.uint8, cap, lay.alive)
        self.codes: npt.NDArray[np.uint64] = np.frombuffer(
            mm, np.uint64, cap * words(self.dim), lay.codes).reshape(words(self.dim), cap)
        self.f16: npt.NDArray[np.float16] = np.frombuffer(
            mm, np.float16, cap * self.dim, lay.f16).reshape(cap, self.dim)
        # A row-major copy of the codes for faiss's kernel (rowcodes.py), once made.
        self.rowcodes: RowCodes | None = None

    def state(self) -> State | None:
        """The newest slot whose checksum holds, or None when neither does."""
        best: State | None = None
        for i in range(2):
            at = self.layout.slots + i * _SLOT_SIZE
            raw = self.mm[at:at + _SLOT.size + 4]  # one copy: a concurrent write fails the CRC
            body, crc = raw[:_SLOT.size], int.from_bytes(raw[_SLOT.size:], "little")
            if zlib.crc32(body) != crc:
                continue
            found = State(*_SLOT.unpack(body))
            if found.counter and (best is None or found.counter > best.counter):
                best = found
        return best

    # -- the writer's side ----------------------------------------------------------------

    def _write(self, at: int, data: bytes | memoryview | npt.NDArray[Any]) -> None:
        assert self.fd is not None, "a read-only vector file"
        view = (memoryview(data) if isinstance(data, bytes | memoryview) else data.data).cast("B")
        while view:
            done = os.pwrite(self.fd, view, at)
            view, at = view[done:], at + done

    def write_rows(self, at: int, ids: npt.NDArray[np.int64], docs: npt.NDArray[np.int64],
                   f16: npt.NDArray[np.float16]) -> None:
        """Rows [at, at + len(ids)), alive; their codes are made from the float16 values."""
        lay, cap = self.layout, self.capacity
        codes = encode(f16.astype(np.float32), self.mean)
        self._write(lay.ids + at * 8, np.ascontiguousarray(ids, "<i8").tobytes())
        self._write(lay.docs + at * 8, np.ascontiguousarray(docs, "<i8").tobytes())
        for w in range(codes.shape[1]):
            self._write(lay.codes + (w * cap + at) * 8, np.ascontiguousarray(codes[:, w], "<u8"))
        self._write(lay.f16 + at * self.dim * 2, np.ascontiguousarray(f16, "<f2").tobytes())
        self._write(lay.alive + at, b"\x01" * len(ids))

    def set_dead(self, rows: npt.NDArray[np.int64]) -> None:
        for row in rows.tolist():
            self._write(self.layout.alive + row, b"\0")

    def write_state(self, state: State) -> None:
        """Write `state` into the slot that does not hold the newest one."""
        body = _SLOT.pack(*state)
        at = self.layout.slots + (state.counter % 2) * _SLOT_SIZE
        self._write(at, body + zlib.crc32(body).to_bytes(4, "little"))

    def sync(self) -> None:
        """Flush what was written to the disk."""
        if self.fd is not None:
            os.fsync(self.fd)

    def close(self) -> None:
        """Close the writer's handle; the mapping goes when no view of it is in use."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def rows_of(ids: npt.NDArray[np.int64], chunks: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The rows of `ids` (a file's ids column, up to its row count) that hold these chunk
    ids, ascending (an id is in one row at most). A binary search finds them while the ids
    ascend (a file written anew, and most rows of any other); a row it misses (the id got
    its vector after later ones, or is not in the file) is looked for in one pass over the
    ids (bench/removed_rows.py measures both)."""
    rows = len(ids)
    if not len(chunks) or not rows:
        return np.zeros(0, np.int64)
    at = np.minimum(np.searchsorted(ids, chunks), rows - 1)
    hit = ids[at] == chunks
    found = np.sort(at[hit]).astype(np.int64)
    missed = chunks[~hit]
    if len(missed):
        found = np.union1d(found, np.flatnonzero(np.isin(ids, missed)).astype(np.int64))
    return found


def _header_bytes(header: Header, mean: npt.NDArray[np.float32]) -> bytes:
    head = _HEAD.pack(MAGIC, VERSION, header.dim, header.capacity, header.generation,
                      header.token, header.mean_n)
    head = head.ljust(_HEAD_CRC, b"\0")
    crc = zlib.crc32(head + mean.astype("<f4").tobytes())
    return head + crc.to_bytes(4, "little")


def open_columns(path: Path, dim: int, *, writable: bool = False) -> Columns:
    """Map the vector file at `path`; VectorFileError when it is missing or not a good one
    (its slots are checked by the caller, against the database)."""
    try:
        fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        raise VectorFileError(f"{path} does not exist") from None
    except OSError as exc:
        raise VectorFileError(f"cannot open {path}: {exc}") from exc
    try:
        info = os.fstat(fd)
        if info.st_size < 2 * PAGE:
            raise VectorFileError(f"{path} is too short to be a vector file")
        head = os.pread(fd, _HEAD_CRC + 4, 0)
        magic, version, fdim, capacity, generation, token, mean_n = _HEAD.unpack_from(head)
        if magic != MAGIC or version != VERSION:
            raise VectorFileError(f"{path} is not a vector file of format {VERSION}")
        if fdim != dim:
            raise VectorFileError(f"{path} holds {fdim}-dimensional vectors, not {dim}")
        layout = Layout.of(dim, capacity)
        if info.st_size < layout.size:
            raise VectorFileError(f"{path} is shorter than its header says")
        mean = os.pread(fd, dim * 4, layout.mean)
        if zlib.crc32(head[:_HEAD_CRC] + mean) != int.from_bytes(head[_HEAD_CRC:], "little"):
            raise VectorFileError(f"{path}: the header's checksum does not match")
        mm = mmap.mmap(fd, layout.size, access=mmap.ACCESS_READ)
    except (OSError, VectorFileError) as exc:
        os.close(fd)
        if isinstance(exc, VectorFileError):
            raise
        raise VectorFileError(f"cannot map {path}: {exc}") from exc
    if not writable:
        os.close(fd)
    header = Header(dim, capacity, generation, token, mean_n)
    return Columns(mm, header, path, info.st_ino, fd if writable else None)


def inode_of(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def staging_path(path: Path, suffix: str = "-new") -> Path:
    return path.with_name(path.name + suffix)


def create_columns(path: Path, dim: int, capacity: int, token: bytes,
                   mean: npt.NDArray[np.float32], mean_n: int,
                   staging: Path | None = None) -> Columns:
    """A new, empty vector file beside `path` (`path`-new unless `staging` is given), to
    write; `install` puts it in place once its rows and slot are written."""
    staging = staging or staging_path(path)
    layout = Layout.of(dim, capacity)
    header = Header(dim, capacity, int.from_bytes(secrets.token_bytes(8), "little"), token,
                    mean_n)
    try:
        fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        raise VectorFileError(f"cannot write {staging}: {exc}") from exc
    try:
        os.ftruncate(fd, layout.size)  # sparse: unwritten capacity takes no disk
        mm = mmap.mmap(fd, layout.size, access=mmap.ACCESS_READ)
        columns = Columns(mm, header, path, os.fstat(fd).st_ino, fd, staging)
        columns._write(0, _header_bytes(header, mean))
        columns._write(layout.mean, mean.astype("<f4").tobytes())
    except OSError as exc:
        os.close(fd)
        raise VectorFileError(f"cannot write {staging}: {exc}") from exc
    return columns


def install(columns: Columns) -> None:
    """Make a file from `create_columns` durable and rename it into place."""
    assert columns.staging is not None, "installed already"
    try:
        columns.sync()
        os.replace(columns.staging, columns.path)
        columns.staging = None
        folder = os.open(columns.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        raise VectorFileError(f"cannot install {columns.path}: {exc}") from exc


def new_token() -> bytes:
    return secrets.token_bytes(16)


def check(columns: Columns, log: ChunkLog, token: bytes | None) -> State:
    """The state of a mapped file if the log can bring it up to date; VectorFileError when
    it cannot (another database's, no valid slot, ahead of the database, behind what the log
    still holds, or another history than the log's)."""
    path = columns.path
    if token is None or columns.header.token != token:
        raise VectorFileError(f"{path} belongs to another database")
    state = columns.state()
    if state is None:
        raise VectorFileError(f"{path}: neither state slot is valid")
    if state.rows > columns.capacity or (
            state.rows and int(columns.ids[state.rows - 1]) != state.last_id):
        raise VectorFileError(f"{path}: its rows do not match its state")
    low, high = log.bounds()
    if state.seq > high:
        raise VectorFileError(f"{path} is ahead of the database (seq {state.seq} > {high})")
    if state.seq < high and low > state.seq + 1:
        raise VectorFileError(f"{path} is behind what the chunk log still holds")
    if state.seq and state.log_chunk >= 0:
        entry = log.entry(state.seq)
        if entry is not None and entry != (state.log_chunk, state.log_added):
            raise VectorFileError(f"{path} follows another history than the database's")
    return state
