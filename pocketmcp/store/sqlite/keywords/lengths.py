"""Chunk lengths in tokens, for scoring keyword queries in numpy (bm25.py).

FTS5 keeps each chunk's length per column in `chunks_fts_docsize`; bm25() divides by it. It
is read whole once per reader pool (one query over the table, parsed in numpy), then follows
the chunk log as the vector file does, so a query finds every length it needs in an array.
Also here: what a read snapshot's scores depend on (`state`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pocketmcp import logs
from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.connect import id_list, open_sync_reader, sqlite_module
from pocketmcp.store.sqlite.log import TOKEN_KEY, ChunkLog

log = logs.get("pocketmcp.keywords")

U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]

# Everything a query's scores depend on, in the reader's snapshot: which database, its
# schema, the last chunk change, and FTS5's averages record (rows and tokens in all; a
# contentless table's deletes leave them as they were, and bm25() uses them as they are).
STATE = ("SELECT (SELECT value FROM meta WHERE key = ?), "
         "(SELECT schema_version FROM pragma_schema_version), "
         "(SELECT user_version FROM pragma_user_version), "
         "(SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'), "
         "(SELECT block FROM chunks_fts_data WHERE id = 1)")


def varints(data: npt.NDArray[np.uint8]) -> I64:
    """SQLite varints of at most 4 bytes each (values below 2**28), back to back."""
    if data.size == 0:
        return np.zeros(0, np.int64)
    last = data < 0x80
    if not last[-1]:
        raise ValueError("the last varint is cut short")
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    if int((ends - starts).max()) > 3:
        raise ValueError("a varint longer than 4 bytes")
    # Each byte's place from the end of its varint: 7 bits a place.
    owner = np.repeat(np.arange(len(ends)), ends - starts + 1)
    place = ends[owner] - np.arange(data.size)
    values = (data & 0x7F).astype(np.int64) << (7 * place)
    return np.add.reduceat(values, starts)


def varint(blob: bytes, at: int = 0) -> tuple[int, int]:
    """One SQLite varint (up to 9 bytes) at `at`: (value, where the next starts); one cut
    short by the end of `blob` is what it holds."""
    value = 0
    for i, byte in enumerate(blob[at:at + 9]):
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return value, len(blob)


def averages(block: bytes) -> tuple[int, int]:
    """(rows, tokens in all columns) from FTS5's averages record."""
    rows, at = varint(block)
    tokens = 0
    while at < len(block):
        column, at = varint(block, at)
        tokens += column
    return rows, tokens


def numbers(text: str) -> I64:
    """Integers separated by commas (six times as quick as splitting the string)."""
    values = np.fromstring(text, dtype=np.int64, sep=",")
    if values.size != text.count(",") + 1:
        raise ValueError("not a list of integers")
    return values


def _parse_lengths(ids: str | None, sizes: str | None, columns: int) -> tuple[I64, I64]:
    if not ids:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    chunk_ids = numbers(ids)
    per_column = varints(np.frombuffer(bytes.fromhex(sizes or ""), dtype=np.uint8))
    if per_column.size != chunk_ids.size * columns:
        raise ValueError("the chunk sizes do not match the chunks")
    return chunk_ids, per_column.reshape(-1, columns).sum(axis=1)


def _columns(conn: Any) -> int:
    return len(conn.execute("SELECT * FROM chunks_fts LIMIT 0").description)


class Sizes:
    """Chunk lengths in tokens by chunk id: an array indexed by id while the ids are dense
    enough, else sorted ids beside their lengths (ids only grow: after much re-indexing the
    highest id can be many times the number of chunks). Not changed once made."""

    SPREAD = 4  # an array indexed by id up to this many times as long as the chunks...
    SLACK = 1 << 16  # ...plus this many

    def __init__(self, ids: I64, lengths: I64) -> None:
        order = np.argsort(ids, kind="stable")
        ids, lengths = ids[order], lengths[order]
        top = int(ids[-1]) + 1 if ids.size else 0
        self.ids: I64 | None = None
        if top <= self.SPREAD * ids.size + self.SLACK:
            self.lengths = np.zeros(top, np.uint32)
            self.lengths[ids] = lengths
        else:
            self.ids, self.lengths = ids, lengths.astype(np.uint32)

    def items(self) -> tuple[I64, I64]:
        """(ids ascending, lengths) of every chunk held."""
        if self.ids is not None:
            return self.ids, self.lengths.astype(np.int64)
        ids = np.flatnonzero(self.lengths).astype(np.int64)
        return ids, self.lengths[ids].astype(np.int64)

    def of(self, chunks: I64) -> U32 | None:
        """The lengths of `chunks` (ascending), or None if one is not held."""
        if chunks.size == 0:
            return np.zeros(0, np.uint32)
        if self.ids is None:
            if int(chunks[-1]) >= len(self.lengths):
                return None
            found: U32 = self.lengths[chunks]
            return found if found.all() else None
        at = np.searchsorted(self.ids, chunks)
        if int(at[-1]) >= len(self.ids) or not np.array_equal(self.ids[at], chunks):
            return None
        picked: U32 = self.lengths[at]
        return picked

    def changed(self, removed: Sequence[int], added: I64, lengths: I64) -> Sizes:
        """A copy without `removed` and with `added` (another thread may be scoring with
        this one)."""
        ids, sizes = self.items()
        keep = ~np.isin(ids, np.asarray([*removed, *added.tolist()], dtype=np.int64))
        return Sizes(np.concatenate([ids[keep], added]), np.concatenate([sizes[keep], lengths]))


def read_lengths(conn: Any) -> Sizes:
    """Every chunk's length in tokens (all columns)."""
    ids, sizes = conn.execute("SELECT group_concat(id), group_concat(hex(sz), '') "
                              "FROM chunks_fts_docsize").fetchone()
    return Sizes(*_parse_lengths(ids, sizes, _columns(conn)))


def _lengths_of(conn: Any, ids: Sequence[int]) -> tuple[I64, I64]:
    """(chunk ids, lengths) of those among `ids` that FTS5 holds."""
    ids_text, sizes = conn.execute(
        "SELECT group_concat(id), group_concat(hex(sz), '') FROM (SELECT id, sz FROM "
        "chunks_fts_docsize WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id)",
        (id_list(ids),)).fetchone()
    return _parse_lengths(ids_text, sizes, _columns(conn))


Identity = tuple[Any, ...]


class ChunkLengths:
    """Chunk lengths for BM25, shared by a pool's connections: for one state of the index
    (its identity and the chunk log's last entry). Owns the thread that reads them in the
    background: `close` stops it."""

    READ_AT_ONCE = 200_000  # chunks read in the caller's query; more, in the background
    CATCH_UP = 50_000  # log entries followed; more, and the lengths are read again
    CHECK_STEPS = 100_000  # SQLite's steps between two checks of a read for close

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._identity: Identity | None = None
        self._seq = -1
        self._lengths = Sizes(np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._reading = False
        self._failed: Identity | None = None  # the index whose lengths could not be read
        self._closed = False
        self._reader: threading.Thread | None = None  # reading in the background

    def get(self, conn: Any, db_path: Path, chunk_log: ChunkLog, identity: Identity, seq: int,
            rows: int) -> Sizes | None:
        """The lengths as of the caller's snapshot (`identity`, `seq`; FTS5 counts `rows`),
        or None while they are being read, or when they cannot be had for it."""
        with self._lock:
            if identity == self._failed:
                return None  # tried and failed for this index: not again on every query
            try:
                if identity != self._identity:
                    if self._reading or rows > self.READ_AT_ONCE:
                        self._read_later(db_path)
                        return None
                    self._install(identity, seq, read_lengths(conn))
                elif seq > self._seq and not self._reading:
                    self._catch_up(conn, chunk_log, seq)
            except ValueError as exc:
                self._fail(identity, exc)
                return None
            if identity != self._identity or seq != self._seq:
                return None  # a snapshot older than the lengths, or newer while reading
            return self._lengths

    def prefetch(self, db_path: Path) -> None:
        """Start reading the lengths in the background, if none are held (at start-up: the
        first searches then find them read)."""
        with self._lock:
            if self._identity is None:
                self._read_later(db_path)

    def _fail(self, identity: Identity | None, exc: Exception) -> None:
        log.warning("cannot read chunk lengths; FTS5 scores keyword queries", error=str(exc))
        self._failed, self._identity = identity, None

    def _install(self, identity: Identity, seq: int, lengths: Sizes) -> None:
        self._identity, self._seq, self._lengths = identity, seq, lengths

    def _catch_up(self, conn: Any, chunk_log: ChunkLog, seq: int) -> None:
        low, _ = chunk_log.bounds()
        changes = chunk_log.changes_since(self._seq, self.CATCH_UP + 1)
        identity = self._identity or ()
        if low > self._seq + 1 or len(changes) > self.CATCH_UP:
            self._install(identity, seq, read_lengths(conn))
            return
        last = {chunk_id: added for _, chunk_id, added in changes}  # the last change wins
        ids, sizes = _lengths_of(conn, [c for c, added in last.items() if added])
        removed = [c for c, added in last.items() if not added]
        self._install(identity, seq, self._lengths.changed(removed, ids, sizes))

    def close(self) -> None:
        """Stop a read in the background (its query is abandoned at the next check) and
        wait for it; none starts after. Safe to call twice."""
        with self._lock:
            self._closed = True
            reader = self._reader
        if reader is not None:
            reader.join()

    def _stopping(self) -> bool:
        return self._closed

    def _read_later(self, db_path: Path) -> None:
        if self._reading or self._closed:
            return
        self._reading = True
        self._reader = threading.Thread(target=self._read, args=(db_path,),
                                        name="pocketmcp.lengths")
        self._reader.start()

    def _read(self, db_path: Path) -> None:
        identity: Identity | None = None
        try:
            conn = open_sync_reader(db_path)
            try:
                # SQLite asks every CHECK_STEPS steps of a query; after close, it gives up.
                conn.set_progress_handler(self._stopping, self.CHECK_STEPS)
                conn.execute("BEGIN")
                identity, seq, _ = state(conn)
                lengths = read_lengths(conn)
                conn.execute("COMMIT")
            finally:
                conn.close()
            with self._lock:
                self._install(identity, seq, lengths)
        except (StoreError, ValueError, sqlite_module().Error) as exc:
            with self._lock:
                if not self._closed:  # given up for close: nothing went wrong
                    self._fail(identity, exc)
        finally:
            with self._lock:
                self._reading = False


def state(conn: Any) -> tuple[Identity, int, tuple[int, int] | None]:
    """(identity, chunk log's last entry, FTS5's (rows, tokens)) of the snapshot."""
    token, schema, user, seq, block = conn.execute(STATE, (TOKEN_KEY,)).fetchone()
    return (token, schema, user), int(seq or 0), averages(bytes(block)) if block else None
