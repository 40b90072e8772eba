"""What the vector file follows: the chunk log, and the vectors it names.

`chunk_log` is filled by triggers inside the writer's own transactions (schema.py), so its
highest sequence number names exactly what is committed. These queries run over any
connection that reads committed data: a reader's, or the writer's own between transactions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.connect import sqlite_errors

I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]
Vectors = tuple[I64, I64, F32]  # chunk ids, doc ids, float32 vectors (n, dim)

# vec0 finds one rowid directly but scans every vector for `rowid IN (...)`.
VECTOR_BY_ID = "SELECT chunk_id, doc_id, embedding FROM vec_chunks WHERE chunk_id = ?"
TOKEN_KEY = "vectors_token"  # meta key: the database's identity, copied into its vector file
# Two primes near 2**20: sum(id % p * (id % q)) fits 64 bits for billions of chunks.
_MIX = "sum((chunk_id % 1048573) * (chunk_id % 1048571))"


Rows = Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]]  # a connection's query


def stored_vectors(rows: Rows, text_shas: Iterable[str],
                   dim: int | None = None) -> dict[str, bytes]:
    """The stored vector of each chunk text among these digests that the index holds with
    one (the vector of any chunk of that text, else one kept from a removed chunk), of `dim`
    floats if given: what the reader's vectors_for and the writer's reuse of known vectors
    both look up."""
    wanted = sorted(set(text_shas))
    if not wanted:
        return {}
    owners: dict[str, int] = {}
    for sha, chunk_id in rows(
            "SELECT text_sha256, chunk_id FROM chunks WHERE waiting = 0 AND "
            "text_sha256 IN (SELECT value FROM json_each(?))",
            (msgspec.json.encode(wanted).decode(),)):
        owners.setdefault(sha, chunk_id)
    found: dict[str, bytes] = {}
    for sha, chunk_id in owners.items():
        for row in rows(VECTOR_BY_ID, (chunk_id,)):
            if dim is None or len(row[2]) == dim * 4:
                found[sha] = bytes(row[2])
    rest = [sha for sha in wanted if sha not in found]
    if rest:  # those of removed chunks, kept a while (store/writes.py)
        for sha, vector in rows(
                "SELECT text_sha256, embedding FROM kept_vectors WHERE text_sha256 IN "
                "(SELECT value FROM json_each(?))", (msgspec.json.encode(rest).decode(),)):
            if dim is None or len(vector) == dim * 4:
                found[sha] = bytes(vector)
    return found


def vector_arrays(rows: list[Any], dim: int) -> Vectors:
    ids = np.asarray([r[0] for r in rows], dtype=np.int64)
    docs = np.asarray([r[1] for r in rows], dtype=np.int64)
    vectors = (np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32)
               .reshape(-1, dim) if rows else np.zeros((0, dim), np.float32))
    return ids, docs, vectors


def id_stats(ids: I64) -> tuple[int, int, int]:
    """(count, sum, mix) of chunk ids, as `ChunkLog.id_stats` computes them in SQL."""
    mix = int(np.sum((ids % 1048573) * (ids % 1048571), dtype=np.int64))
    return len(ids), int(np.sum(ids, dtype=np.int64)), mix


class ChunkLog:
    """The chunk log over one connection. Not thread-safe: one caller at a time."""

    def __init__(self, conn: Any, db_path: Path) -> None:
        self._conn = conn
        self.db_path = db_path

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return list(self._conn.execute(sql, args).fetchall())
        except sqlite_errors() as exc:
            raise StoreError(f"{self.db_path}: {exc}") from exc

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """One read snapshot for the queries inside (a reader's connection only)."""
        self._rows("BEGIN")
        try:
            yield
        finally:
            self._rows("COMMIT")

    def data_version(self) -> int:
        """Changes whenever another connection commits (SQLite's own counter)."""
        return int(self._rows("PRAGMA data_version")[0][0])

    def bounds(self) -> tuple[int, int]:
        """(lowest, highest) sequence number in the log; (last + 1, last) when it is empty."""
        # Two queries: min() and max() together would scan the table instead of seeking.
        high = int(self._rows("SELECT coalesce(max(seq), 0) FROM chunk_log")[0][0])
        if high == 0:
            # An empty log may still have had entries: sqlite_sequence remembers the last.
            seq = self._rows("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'")
            last = int(seq[0][0]) if seq else 0
            return last + 1, last
        low = int(self._rows("SELECT coalesce(min(seq), 0) FROM chunk_log")[0][0])
        return low, high

    def changes_since(self, seq: int, limit: int) -> list[tuple[int, int, int]]:
        """(seq, chunk_id, added) after `seq`, in order."""
        return [(int(a), int(b), int(c)) for a, b, c in self._rows(
            "SELECT seq, chunk_id, added FROM chunk_log WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit))]

    def entry(self, seq: int) -> tuple[int, int] | None:
        """(chunk_id, added) of log entry `seq`, or None when the log no longer holds it."""
        rows = self._rows("SELECT chunk_id, added FROM chunk_log WHERE seq = ?", (seq,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def vectors_by_ids(self, ids: Sequence[int], dim: int) -> Vectors:
        """The chunks that still exist among `ids`, ascending."""
        rows: list[Any] = []
        for chunk_id in sorted(set(ids)):
            rows.extend(self._rows(VECTOR_BY_ID, (chunk_id,)))
        return vector_arrays(rows, dim)

    def chunk_count(self) -> int:
        return int(self._rows("SELECT count(*) FROM chunks WHERE waiting = 0")[0][0])

    def snapshot(self, dim: int, on_start: Callable[[int, int], None],
                 on_block: Callable[[I64, I64, F32], None], block: int = 16384) -> int:
        """Every chunk's vector in blocks, from one read snapshot: `on_start(rows, seq)`
        first, then `on_block(ids, doc ids, vectors)`; returns the snapshot's seq."""
        with self.pinned():
            seq = self.bounds()[1]
            on_start(self.chunk_count(), seq)
            try:
                cursor = self._conn.execute("SELECT chunk_id, doc_id, embedding FROM vec_chunks")
                while rows := cursor.fetchmany(block):
                    on_block(*vector_arrays(rows, dim))
            except sqlite_errors() as exc:
                raise StoreError(f"{self.db_path}: {exc}") from exc
        return seq

    def id_stats(self) -> tuple[int, int, int]:
        """(count, sum, mix) of every chunk id, to check a vector file against."""
        row = self._rows(f"SELECT count(*), coalesce(sum(chunk_id), 0), coalesce({_MIX}, 0) "
                         "FROM chunks WHERE waiting = 0")[0]
        return int(row[0]), int(row[1]), int(row[2])

    def token(self) -> bytes | None:
        """The database's identity (set by its writer), or None before it has one."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (TOKEN_KEY,))
        try:
            return bytes.fromhex(str(rows[0][0])) if rows else None
        except ValueError:
            return None

    def knn(self, query: bytes, k: int, doc_ids: Sequence[int] | None = None
            ) -> tuple[I64, F32, I64]:
        """The exact `k` nearest chunks by sqlite-vec's own scan (slower, always right):
        (chunk ids, cosine similarities, doc ids), best first."""
        where, args = "", [query, k]
        if doc_ids is not None:
            if not doc_ids:
                return (np.zeros(0, np.int64), np.zeros(0, np.float32),
                        np.zeros(0, np.int64))
            where = f" AND doc_id IN ({','.join('?' * len(doc_ids))})"
            args.extend(doc_ids)
        rows = self._rows("SELECT chunk_id, distance, doc_id FROM vec_chunks "
                          f"WHERE embedding MATCH ? AND k = ?{where} ORDER BY distance", args)
        return (np.asarray([r[0] for r in rows], dtype=np.int64),
                np.asarray([1.0 - r[1] for r in rows], dtype=np.float32),
                np.asarray([r[2] for r in rows], dtype=np.int64))
