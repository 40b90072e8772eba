"""Every chunk vector of an index as searches see it.

The vector file (vecfile.py), mapped read-only, holds the rows up to its slot's seq; what the
chunk log says happened after that (a commit the writer has not applied yet, or a writer
that stopped) is followed here in memory: rows added since, and rows removed since. So every
process, the writer's own or a read-only one, sees each commit as soon as SQLite does, and
writes nothing. When the file cannot be used (missing, being rebuilt, another database's, or
further behind than DELTA_LIMIT log entries), searches answer from sqlite-vec's own exact
scan instead: slower, still right.

Opening costs a stat, a header read and a map: milliseconds at any size.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pocketmcp.errors import VectorFileError
from pocketmcp.store.api import Found
from pocketmcp.store.sqlite.log import ChunkLog
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.vectors import scan
from pocketmcp.store.sqlite.vectors.file import (
    PAGE,
    Columns,
    State,
    check,
    inode_of,
    open_columns,
    rows_of,
    vectors_path,
)
from pocketmcp.store.sqlite.vectors.rowcodes import F32, I64, RowCodes, kernel

KNN_MOST = 4096  # sqlite-vec's largest k
EXACT_SCAN_LIMIT = 8192  # up to this many rows, the float16 pass alone scans them all
DELTA_LIMIT = 50_000  # log entries followed past the file; further behind, SQLite answers
PAGE_ENTRIES = 20000
SHORTLIST = 10  # rows kept by the Hamming pass, per row rescored in float16
WARM_ROWS = 65536  # float16 rows a step of the background read that maps them


def _empty() -> Found:
    return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64)


class _Delta:
    """The chunk log past the file's slot: rows added since, in memory, and file rows
    removed since."""

    def __init__(self, state: State, dim: int) -> None:
        self.base = state.seq
        self.seq = state.seq
        self.ids = np.zeros(0, np.int64)
        self.docs = np.zeros(0, np.int64)
        self.f16 = np.zeros((0, dim), np.float16)
        self.masked = np.zeros(0, np.int64)  # file rows removed since the slot

    def follow(self, source: ChunkLog, cols: Columns, state: State, high: int) -> None:
        while self.seq < high:
            changes = source.changes_since(self.seq, PAGE_ENTRIES)
            if not changes:
                break
            removed = {chunk for _, chunk, added in changes if not added}
            # Each chunk is added once: one past the slot's seq is in no row of the file.
            wanted = [chunk for _, chunk, added in changes if added and chunk not in removed]
            if removed:
                gone = np.fromiter(sorted(removed), dtype=np.int64)
                keep = ~np.isin(self.ids, gone)
                self.ids, self.docs, self.f16 = self.ids[keep], self.docs[keep], self.f16[keep]
                self.masked = np.union1d(self.masked, rows_of(cols.ids[:state.rows], gone))
            if wanted:
                ids, docs, vectors = source.vectors_by_ids(wanted, cols.dim)
                self.ids = np.concatenate([self.ids, ids])
                self.docs = np.concatenate([self.docs, docs])
                self.f16 = np.concatenate([self.f16, vectors.astype(np.float16)])
            self.seq = changes[-1][0]

    def search(self, query: F32, k: int, allowed: I64 | None) -> Found:
        rows = np.arange(len(self.ids)) if allowed is None else np.flatnonzero(
            np.isin(self.docs, allowed))
        scores = scan.dot16(self.f16, rows, query)
        best = scan.top(scores, k)
        return self.ids[rows[best]], scores[best], self.docs[rows[best]]


def _warm(cols: Columns, rows: int, stop: threading.Event) -> None:
    """Read one byte of each page of the codes and of the float16 rows, so the mapping's
    pages are this process's before searches need them (background; numpy lets go of the
    GIL). Each page a search touches first costs a fault: a search at 1M chunks rescores
    2000 rows on as many pages, 5 ms more than on pages already mapped, until most of the
    file has been touched once. Where faiss loads, the codes are read by copying them row by
    row for its kernel instead (rowcodes.py), and the copy is handed to searches when whole.
    The arrays hold the mapping open while this runs. Returns at the next step once `stop`
    is set (a copy left unfinished is not handed to searches)."""
    codes, f16 = cols.codes, cols.f16
    columns = [f16.view(np.uint8)[:rows]]
    if kernel() is not None:
        copy = RowCodes(cols.capacity, codes.shape[0])
        for lo in range(0, rows, WARM_ROWS):
            if stop.is_set():
                return
            copy.extend(codes, min(rows, lo + WARM_ROWS))
        cols.rowcodes = copy
    else:
        columns.insert(0, codes.view(np.uint8).reshape(codes.shape[0], -1)[:, :rows * 8])
    for column in columns:
        for lo in range(0, len(column), WARM_ROWS):
            if stop.is_set():
                return
            part = column[lo:lo + WARM_ROWS]
            np.bitwise_or.reduce(part.reshape(-1)[::PAGE] if part.flags.c_contiguous
                                 else part[:, ::PAGE], axis=None)


class VectorIndex:
    """The vector file of one index, followed past its slot through the log; searched in
    three passes (scan.py), shared by the `pool`'s threads when one is lent (else on the
    calling thread). Thread-safe: one search or sync at a time. Owns the thread that warms
    each mapping: `close` stops it."""

    def __init__(self, db_path: Path, dim: int, *, pool: Threads | None = None) -> None:
        self.path = vectors_path(db_path)
        self.dim = dim
        self._pool = pool
        self._lock = threading.Lock()
        self._closed = False
        self._warming: list[tuple[threading.Thread, threading.Event]] = []
        self._inode: int | None = None
        self._opened = False
        self._cols: Columns | None = None
        self._state: State | None = None
        self._delta: _Delta | None = None
        self._seen: dict[int, tuple[int, State | None, int | None]] = {}
        self.reason: str | None = "not opened yet"  # why SQLite answers; None: the file does
        self._sqlite_rows = 0

    @property
    def live(self) -> int:
        """Chunks a search can find (as of the last sync)."""
        state, delta = self._state, self._delta
        if self.reason is not None or state is None:
            return self._sqlite_rows
        if delta is None:
            return state.live
        return state.live - len(delta.masked) + len(delta.ids)

    @property
    def behind(self) -> int:
        """Log entries the file's slot is behind the database (as of the last sync)."""
        delta = self._delta
        return 0 if delta is None else delta.seq - delta.base

    # -- keeping in step ----------------------------------------------------------------------

    def sync(self, source: ChunkLog) -> None:
        """Catch up with what is committed (blocking: call from a worker thread)."""
        with self._lock:
            self._sync(source)

    def _sync(self, source: ChunkLog) -> None:
        inode = inode_of(self.path)
        if inode != self._inode or not self._opened:
            self._map(source, inode)
        cols = self._cols
        state = cols.state() if cols is not None else None
        version = source.data_version()
        key = id(source)
        if self._seen.get(key) == (version, state, inode) and self._opened:
            return  # nothing committed, and the file unchanged, since this connection looked
        self._seen[key] = (version, state, inode)
        self._opened = True
        low, high = source.bounds()
        if cols is None or state is None or state.seq > high or (
                state.seq < high and (low > state.seq + 1 or high - state.seq > DELTA_LIMIT)):
            self._use_sqlite(source, self._why(cols, state, low, high))
            return
        self.reason = None
        self._state = state
        if state.seq == high:
            self._delta = None
            return
        delta = self._delta
        if delta is None or delta.base != state.seq or delta.seq > high:
            delta = self._delta = _Delta(state, self.dim)
        delta.follow(source, cols, state, high)

    def _map(self, source: ChunkLog, inode: int | None) -> None:
        """Map the file at the path now (a new one after a rebuild or compaction)."""
        self._inode = inode
        self._cols, self._state, self._delta = None, None, None
        self._seen.clear()
        if inode is None:
            self.reason = f"{self.path} does not exist yet"
            return
        try:
            cols = open_columns(self.path, self.dim)
            check(cols, source, source.token())
        except VectorFileError as exc:
            self.reason = str(exc)
            return
        self._cols = cols
        state = cols.state()
        if state is not None and state.rows and not self._closed:
            self._start_warm(cols, state.rows)

    def _start_warm(self, cols: Columns, rows: int) -> None:
        """Warm the new mapping in the background; an older one's warm-up stops (searches
        no longer use it)."""
        for _, stop in self._warming:
            stop.set()
        self._warming = [(t, stop) for t, stop in self._warming if t.is_alive()]
        stop = threading.Event()
        thread = threading.Thread(target=_warm, args=(cols, rows, stop),
                                  name="pocketmcp.vectors.warm")
        thread.start()
        self._warming.append((thread, stop))

    def close(self) -> None:
        """Stop the warm-up of the mapping (at its next step) and wait for it; a search or
        sync running meanwhile finishes first. Searches still answer after (no new warm-up
        starts). Safe to call twice."""
        with self._lock:
            self._closed = True
            warming, self._warming = self._warming, []
        for _, stop in warming:
            stop.set()
        for thread, _ in warming:
            thread.join()

    def _why(self, cols: Columns | None, state: State | None, low: int, high: int) -> str:
        if cols is None:
            return self.reason or "no vector file"
        if state is None:
            return f"{self.path}: neither state slot is valid"
        if state.seq > high:
            return f"{self.path} is ahead of the database"
        return f"{self.path} is {high - state.seq} changes behind the database"

    def _use_sqlite(self, source: ChunkLog, reason: str) -> None:
        self.reason = reason
        self._state, self._delta = None, None
        self._sqlite_rows = source.chunk_count()

    # -- searching ----------------------------------------------------------------------------

    def search(self, source: ChunkLog, query: F32, k: int, candidates: int,
               allowed_docs: Sequence[int] | None = None) -> Found:
        """The `k` nearest chunks to unit vector `query`: (chunk ids, cosine similarities,
        doc ids), best first; only among `allowed_docs` when given. `candidates` rows are
        rescored in float16 (within about 0.001 of the exact cosine); from SQLite the
        scores are exact."""
        with self._lock:
            self._sync(source)
            if self.reason is not None or self._cols is None or self._state is None:
                docs = None if allowed_docs is None else list(allowed_docs)
                return source.knn(query.astype(np.float32).tobytes(), min(k, KNN_MOST), docs)
            allowed = None if allowed_docs is None else np.asarray(allowed_docs, np.int64)
            found = [self._search_file(self._cols, self._state, query, k, candidates,
                                       allowed)]
            if self._delta is not None and len(self._delta.ids):
                found.append(self._delta.search(query, k, allowed))
            chunks, scores, of_docs = scan.merge(found, k)
            order = np.lexsort((chunks, -scores))  # equal scores by chunk id, wherever the rows
            return chunks[order], scores[order], of_docs[order]

    def _search_file(self, cols: Columns, state: State, query: F32, k: int, candidates: int,
                     allowed: I64 | None) -> Found:
        n = state.rows
        masked = self._delta.masked if self._delta is not None else np.zeros(0, np.int64)
        ok = None
        if allowed is not None:
            ok = np.isin(cols.docs[:n], allowed) & (cols.alive[:n] == 1)
            ok[masked] = False
            if int(ok.sum()) <= max(candidates, EXACT_SCAN_LIMIT):
                return self._exact(cols, np.flatnonzero(ok), query, k)
        elif n <= EXACT_SCAN_LIMIT or state.live - len(masked) <= candidates:
            ok = cols.alive[:n] == 1
            ok[masked] = False
            return self._exact(cols, np.flatnonzero(ok), query, k)
        qcode = scan.encode(query[None, :], cols.mean)[0]
        some_dead = ok is None and state.live < n
        copy = cols.rowcodes
        if copy is not None:
            copy.extend(cols.codes, n)  # rows appended since (under the lock: one caller)
        alive = cols.alive if some_dead else None
        dead = len(qcode) * 64 + 1  # the distance of rows left out
        if ok is None and len(masked):
            ok = cols.alive[:n] == 1
            ok[masked] = False
        keep, pool = candidates * SHORTLIST, self._pool
        rows = None if copy is None else scan.shortlist(copy, n, qcode, keep, dead, alive, ok,
                                                        pool=pool)
        if rows is None:
            dist = scan.hamming(cols.codes, n, qcode, alive, copy, pool=pool)
            if ok is not None:
                dist[~ok] = dead
            rows = scan.within(dist, keep, dead, pool=pool)
        planes, low, step = scan.query_planes(query, cols.mean)
        estimate = scan.asymmetric(cols.codes, rows, planes, low, step, copy)
        return self._exact(cols, np.sort(rows[scan.top(estimate, candidates)]), query, k)

    @staticmethod
    def _exact(cols: Columns, rows: I64, query: F32, k: int) -> Found:
        if not len(rows):
            return _empty()
        rows = rows[np.argsort(cols.ids[rows], kind="stable")]  # equal scores: by chunk id
        scores = scan.dot16(cols.f16, rows, query)
        best = scan.top(scores, k)
        picked = rows[best]
        return cols.ids[picked].copy(), scores[best], cols.docs[picked].copy()
