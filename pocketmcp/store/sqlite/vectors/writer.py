"""Keeping an index's vector file in step with its database: the writer's side.

The SqliteWriter owns one VectorFileWriter. After each commit, in the writer's thread, it
applies the chunk_log entries past the file's slot (vecfile.py describes the file and why
this order survives a crash). Opening checks the file against the database in milliseconds;
what cannot be settled that fast (a long stretch of log to replay, a file to rebuild, the
check of every chunk id against SQLite) is left to `repair`, which the writer actor runs in a
background thread while commits go on. Until the file is up to date, searches follow the log
past it or answer from sqlite-vec (vectors/index.py), so they are never wrong, only slower.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pocketmcp import logs
from pocketmcp.errors import StoreError, VectorFileError
from pocketmcp.store.sqlite.connect import open_sync_reader
from pocketmcp.store.sqlite.log import ChunkLog, Vectors, id_stats
from pocketmcp.store.sqlite.vectors.build import (
    BLOCK,
    MIN_CAPACITY,
    Build,
    Stopped,
    capacity_for,
    discard,
    log_entry,
)
from pocketmcp.store.sqlite.vectors.file import (
    EMPTY,
    Columns,
    State,
    check,
    create_columns,
    install,
    open_columns,
    rows_of,
    staging_path,
    vectors_path,
)

log = logs.get("pocketmcp.vectors")

I64 = npt.NDArray[np.int64]
Fresh = Mapping[int, tuple[int, bytes]]  # chunk id -> (doc id, float32 vector) just written

CATCH_UP_INLINE = 5000  # log entries replayed while opening; a longer stretch waits for repair
PAGE_ENTRIES = 20000  # log entries applied at a time
RECENTRE_LIMIT = 131072  # a mean over this many rows is a large enough sample: no new centre
SAMPLE = 32  # rows (newest, and as many at random) compared with SQLite when checking


class VectorFileWriter:
    """The vector file of one index as its writer keeps it. Methods run in the writer's
    thread, except `repair` (a background thread); a lock keeps them apart."""

    def __init__(self, dim: int, token: bytes, source: ChunkLog) -> None:
        self.db_path = source.db_path
        self.path = vectors_path(source.db_path)
        self.dim = dim
        self.token = token
        self._log = source  # over the writer's own connection
        self._lock = threading.Lock()
        self._cols: Columns | None = None
        self._state = EMPTY
        self.pending: str | None = None  # why `repair` has work to do, beyond checking
        self.checked = False  # every chunk id and a sample of vectors matched SQLite
        self.failed = False  # a rebuilt file did not match either: searches use SQLite
        self._repairing = False
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._open()

    # -- opening and closing ------------------------------------------------------------------

    def _open(self) -> None:
        for suffix in ("-new", "-sorted"):  # a rebuild cut short
            staging_path(self.path, suffix).unlink(missing_ok=True)
        try:
            cols = open_columns(self.path, self.dim, writable=True)
        except VectorFileError as exc:
            self._unusable(str(exc))
            return
        try:
            self._state = check(cols, self._log, self.token)
        except VectorFileError as exc:
            cols.close()
            self._unusable(str(exc))
            return
        self._cols = cols
        high = self._log.bounds()[1]
        if high - self._state.seq <= CATCH_UP_INLINE:
            self._advance(self._log, None)
        else:
            self.pending = f"{high - self._state.seq} changes behind the database"

    def _unusable(self, reason: str) -> None:
        """No usable file: an empty index gets a new one now, any other a rebuild later."""
        if self._log.chunk_count() == 0:
            self._build_empty(self._log)
        else:
            self.pending = reason

    def _build_empty(self, source: ChunkLog) -> None:
        seq = source.bounds()[1]
        cols = create_columns(self.path, self.dim, MIN_CAPACITY, self.token,
                              np.zeros(self.dim, np.float32), 0)
        state = State(1, 0, seq, 0, 0, *log_entry(source, seq))
        cols.write_state(state)
        install(cols)
        self._swap(cols, state)

    def _swap(self, cols: Columns, state: State) -> None:
        if self._cols is not None and self._cols is not cols:
            self._cols.close()
        self._cols, self._state = cols, state

    def stop(self) -> None:
        """Ask a running repair to stop soon (it leaves no harm behind)."""
        self._stop.set()

    def close(self) -> None:
        """Stop the repair, flush the file to disk and let it go."""
        self._stop.set()
        self._idle.wait(30)
        with self._lock:
            if self._cols is not None:
                try:
                    self._cols.sync()
                except OSError as exc:
                    log.warning("vector_file_sync_failed", path=str(self.path), error=str(exc))
                self._cols.close()
                self._cols = None

    @property
    def state(self) -> State | None:
        return None if self._cols is None else self._state

    @property
    def wants_repair(self) -> bool:
        return not (self._repairing or self._stop.is_set() or self.failed) and (
            self.pending is not None or not self.checked)

    # -- after each commit --------------------------------------------------------------------

    def after_commit(self, fresh: Fresh) -> None:
        """Apply what the commit logged (writer thread, right after COMMIT)."""
        with self._lock:
            if self._cols is None or self._repairing or self.pending is not None:
                return  # `repair` brings the file up to date
            try:
                if not self._advance(self._log, fresh):
                    self.pending = "the chunk log no longer reaches back to the file"
            except VectorFileError as exc:  # a full disk, say: the commit stands
                log.error("vector_file_failed", path=str(self.path), error=str(exc))
                self.pending = str(exc)

    def _advance(self, source: ChunkLog, fresh: Fresh | None,
                 limit: int | None = None) -> bool:
        """Apply the log past the file's seq (at most about `limit` entries); False when the
        log no longer reaches back that far."""
        low, high = source.bounds()
        done = 0
        while self._state.seq < high and (limit is None or done < limit):
            if low > self._state.seq + 1:
                return False
            changes = source.changes_since(self._state.seq, PAGE_ENTRIES)
            if not changes:
                break
            self._apply(source, changes, fresh)
            done += len(changes)
        return self._state.seq <= high

    def _apply(self, source: ChunkLog, changes: list[tuple[int, int, int]],
               fresh: Fresh | None) -> None:
        cols, st = self._cols, self._state
        assert cols is not None
        removed = {chunk for _, chunk, added in changes if not added}
        # Each chunk is added once: one past the slot's seq is in no row below `rows`.
        wanted = [chunk for _, chunk, added in changes if added and chunk not in removed]
        ids, docs, vectors = self._vectors(source, wanted, fresh)
        live = st.live
        if removed:
            rows = rows_of(cols.ids[:st.rows], np.fromiter(sorted(removed), dtype=np.int64))
            # Every one was alive at the slot's seq: a chunk is removed once, and its byte
            # may have been flipped already by a writer that died before writing the slot.
            cols.set_dead(rows[cols.alive[rows] == 1])
            live -= len(rows)
        seq, chunk, added = changes[-1]
        count = st.rows
        dead = count - live
        due = (count + len(ids) > cols.capacity or dead > max(1024, count // 4)
               or self._recentre_due(live + len(ids)))
        if due:
            self._rewrite((ids, docs, vectors), seq, (chunk, added))
            return
        if len(ids):
            cols.write_rows(count, ids, docs, vectors.astype(np.float16))
        last = int(ids[-1]) if len(ids) else st.last_id
        state = State(st.counter + 1, count + len(ids), seq, live + len(ids), last, chunk, added)
        cols.write_state(state)
        self._state = state

    def _vectors(self, source: ChunkLog, wanted: list[int], fresh: Fresh | None) -> Vectors:
        """(ids, doc ids, vectors) of the `wanted` chunks that exist, ascending: those the
        writer has just written from memory, the others from SQLite."""
        known = fresh or {}
        missing = [c for c in wanted if c not in known]
        ids, docs, vectors = source.vectors_by_ids(missing, self.dim) if missing else (
            np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, self.dim), np.float32))
        have = [c for c in wanted if c in known]
        if not have:
            return ids, docs, vectors
        all_ids = np.concatenate([ids, np.asarray(have, dtype=np.int64)])
        all_docs = np.concatenate([docs, np.asarray([known[c][0] for c in have], np.int64)])
        mine = np.frombuffer(b"".join(known[c][1] for c in have), np.float32).reshape(
            len(have), self.dim)
        all_vectors = np.concatenate([vectors, mine])
        order = np.argsort(all_ids, kind="stable")
        return all_ids[order], all_docs[order], all_vectors[order]

    def _recentre_due(self, live: int) -> bool:
        assert self._cols is not None
        mean_n = self._cols.header.mean_n
        return mean_n < RECENTRE_LIMIT and live >= 2 * max(mean_n, 512)

    # -- writing a file anew -----------------------------------------------------------------

    def _rewrite(self, extra: Vectors, seq: int, entry: tuple[int, int]) -> None:
        """A new file of the live rows plus `extra`, in id order (chunks that got their
        vectors late are in order again), re-centred while the centre is a small sample,
        renamed into place (compaction, growth)."""
        old, st = self._cols, self._state
        assert old is not None
        keep = np.flatnonzero(old.alive[:st.rows]).astype(np.int64)
        rows = len(keep) + len(extra[0])
        mean, mean_n = old.mean.copy(), old.header.mean_n
        if mean_n < RECENTRE_LIMIT and rows:
            step = max(1, rows // RECENTRE_LIMIT)
            sample = [old.f16[keep[::step]].astype(np.float32), extra[2][::step]]
            mean = np.concatenate(sample).mean(axis=0).astype(np.float32)
            mean_n = rows
        ids = np.concatenate([old.ids[keep], extra[0]])
        order = np.argsort(ids, kind="stable")
        new = create_columns(self.path, self.dim, capacity_for(rows), self.token, mean, mean_n)
        try:
            for lo in range(0, rows, BLOCK):
                part = order[lo:lo + BLOCK]
                kept = part < len(keep)  # the others are rows of `extra`
                docs = np.empty(len(part), np.int64)
                f16 = np.empty((len(part), self.dim), np.float16)
                at, more = keep[part[kept]], part[~kept] - len(keep)
                docs[kept], f16[kept] = old.docs[at], old.f16[at]
                docs[~kept], f16[~kept] = extra[1][more], extra[2][more].astype(np.float16)
                new.write_rows(lo, ids[part], docs, f16)
            last = int(ids[order[-1]]) if rows else 0  # the last row's id, the highest
            state = State(1, rows, seq, rows, last, *entry)
            new.write_state(state)
            install(new)
        except BaseException:
            discard(new)
            raise
        self._swap(new, state)

    # -- repair, in the background ------------------------------------------------------------

    def repair(self) -> None:
        """Bring the file up to date (in place, or rebuilt from a snapshot of SQLite) and
        check it against the database; a file that fails the check is rebuilt once.
        Blocking, in a background thread while commits go on; returns early when stopped."""
        with self._lock:
            if self._repairing or self._stop.is_set():
                return
            self._repairing = True
            self._idle.clear()
        conn = None
        try:
            conn = open_sync_reader(self.db_path)
            source = ChunkLog(conn, self.db_path)
            for _ in range(2):
                self._up_to_date(source)
                problem = self._check(source)
                if problem is None:
                    self.checked = True
                    log.info("vector_file_ready", path=str(self.path), rows=self._state.live)
                    return
                log.warning("vector_file_mismatch", path=str(self.path), problem=problem)
                with self._lock:
                    self.pending = problem
                    if self._cols is not None:
                        self._cols.close()
                    self._cols = None
            log.error("vector_file_unusable", path=str(self.path),
                      reason="a rebuilt file did not match the database")
            self.failed = True
            self.path.unlink(missing_ok=True)  # searches answer from SQLite
        except Stopped:
            pass
        except (StoreError, OSError) as exc:
            log.error("vector_file_repair_failed", path=str(self.path), error=str(exc))
        finally:
            with self._lock:
                if conn is not None:
                    self._settle(ChunkLog(conn, self.db_path))
                    conn.close()
                self._repairing = False
                self._idle.set()

    def _settle(self, source: ChunkLog) -> None:
        """Apply what was committed while the repair ran (commits left it to the repair)."""
        if self._cols is None or self.pending is not None or self._stop.is_set():
            return
        try:
            if not self._advance(source, None):
                self.pending = "the chunk log no longer reaches back to the file"
        except (StoreError, VectorFileError) as exc:
            log.error("vector_file_failed", path=str(self.path), error=str(exc))
            self.pending = str(exc)

    def _up_to_date(self, source: ChunkLog) -> None:
        while True:
            if self._stop.is_set():
                raise Stopped
            with self._lock:
                if self._cols is not None:
                    if not self._advance(source, None, limit=PAGE_ENTRIES):
                        self._cols.close()
                        self._cols = None
                        self.pending = "the chunk log no longer reaches back to the file"
                    elif self._state.seq >= source.bounds()[1]:
                        self.pending = None
                        return
                    continue
            self._rebuild(source)

    def _rebuild(self, source: ChunkLog) -> None:
        """A new file from one read snapshot of SQLite, installed at that snapshot's seq
        (the log takes it from there)."""
        build = Build(self.path, self.dim, self.token, self._stop)
        try:
            seq = source.snapshot(self.dim, build.start, build.block)
            state = build.finish(seq, log_entry(source, seq))
        except BaseException:
            build.abandon()
            raise
        with self._lock:
            install(build.cols)
            self._swap(build.cols, state)
        log.info("vector_file_rebuilt", path=str(self.path), rows=state.rows, seq=seq)

    def _check(self, source: ChunkLog) -> str | None:
        """Every chunk id (count, sum, and a mix) and a sample of the vectors against one
        snapshot of SQLite; None when they match, else what differs."""
        with self._lock, source.pinned():
            if self._cols is None:
                return self.pending or "no vector file"
            if not self._advance(source, None) or self._state.seq != source.bounds()[1]:
                return "the file cannot reach the database's state"
            cols, st = self._cols, self._state
            rows = np.flatnonzero(cols.alive[:st.rows]).astype(np.int64)
            ids = cols.ids[rows]
            want, got = source.id_stats(), id_stats(ids)
            if got != want or len(rows) != st.live:
                return (f"the file holds {got[0]} chunks ({st.live} by its state), the "
                        f"database {want[0]}, or other ids")
            pick = np.unique(np.concatenate([rows[-SAMPLE:], np.random.default_rng().choice(
                rows, min(SAMPLE, len(rows)), replace=False)])) if len(rows) else rows
            pick = pick[np.argsort(cols.ids[pick], kind="stable")]  # as SQLite gives them
            found_ids, found_docs, vectors = source.vectors_by_ids(cols.ids[pick].tolist(),
                                                                   self.dim)
            if (not np.array_equal(found_ids, cols.ids[pick])
                    or not np.array_equal(found_docs, cols.docs[pick])
                    or not np.allclose(cols.f16[pick].astype(np.float32), vectors,
                                       atol=2e-3, rtol=0)):
                return "sampled vectors differ from the database's"
        return None
