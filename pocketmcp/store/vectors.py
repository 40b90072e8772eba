"""Every chunk vector of an index in memory, searched in two passes.

sqlite-vec scans float32 vectors without SIMD, about ten times slower than numpy. Here a first
pass compares 1-bit codes (the sign of each dimension after centring: 48 bytes a vector) by
Hamming distance, and a second pass rescores the best candidates with float16 copies of the
vectors. About 830 bytes a chunk (800 MB for a million).

The index follows the database through `chunk_log`, which triggers fill in the writer's own
transactions, so any process (writer or read-only) stays in step with what is committed.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from pocketmcp.store.queries import IndexReader

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# Below this many vectors the float16 pass alone scans everything.
EXACT_SCAN_LIMIT = 8192


# Above this many rows the Hamming pass is split over two threads (numpy releases the GIL).
PARALLEL_ROWS = 100_000
_pool: ThreadPoolExecutor | None = None


def _hamming(codes: npt.NDArray[np.uint64], query: npt.NDArray[np.uint64]
             ) -> npt.NDArray[np.uint16]:
    global _pool
    if len(codes) < PARALLEL_ROWS:
        return _hamming_part(codes, query)
    if _pool is None:
        _pool = ThreadPoolExecutor(2, thread_name_prefix="pocketmcp.hamming")
    half = len(codes) // 2
    parts = list(_pool.map(_hamming_part, (codes[:half], codes[half:]), (query, query)))
    return np.concatenate(parts)


def _hamming_part(codes: npt.NDArray[np.uint64], query: npt.NDArray[np.uint64]
                  ) -> npt.NDArray[np.uint16]:
    out: npt.NDArray[np.uint16] = np.bitwise_count(codes ^ query).sum(axis=1, dtype=np.uint16)
    return out


def _codes(vectors: F32, mean: F32) -> npt.NDArray[np.uint64]:
    bits = np.packbits((vectors - mean) > 0, axis=1)
    return bits.view(np.uint64)




class VectorIndex:
    def __init__(self, dim: int) -> None:
        if dim % 64:
            raise ValueError("the dimension must be a multiple of 64")
        self.dim = dim
        self.n = 0
        self.last_seq = 0
        self.loaded = False
        self.dead = 0
        self._mean = np.zeros(dim, dtype=np.float32)
        self._mean_n = 0
        self._lock = threading.Lock()
        self._seen_version: dict[int, int] = {}
        self._alloc(1024)

    def _alloc(self, capacity: int) -> None:
        words = self.dim // 64
        self.ids: I64 = np.zeros(capacity, dtype=np.int64)
        self.docs: I64 = np.zeros(capacity, dtype=np.int64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.codes = np.zeros((capacity, words), dtype=np.uint64)
        self.f16 = np.zeros((capacity, self.dim), dtype=np.float16)

    def _grow(self, needed: int) -> None:
        capacity = len(self.ids)
        if needed <= capacity:
            return
        new = max(needed, capacity * 2)
        old = (self.ids, self.docs, self.alive, self.codes, self.f16)
        self._alloc(new)
        n = self.n
        self.ids[:n], self.docs[:n], self.alive[:n] = old[0][:n], old[1][:n], old[2][:n]
        self.codes[:n], self.f16[:n] = old[3][:n], old[4][:n]

    @property
    def live(self) -> int:
        return self.n - self.dead

    # -- keeping in step with the database ----------------------------------------------------

    def sync(self, reader: IndexReader) -> None:
        """Apply what was committed since the last sync (blocking; call from a thread)."""
        with self._lock:
            version = reader.data_version()
            if self.loaded and version == self._seen_version.get(id(reader)):
                return  # nothing committed since this reader last looked
            self._seen_version[id(reader)] = version
            low, high = reader.log_bounds()
            if self.loaded and high == self.last_seq:
                return
            if not self.loaded or low > self.last_seq + 1:
                self._reload(reader)
                return
            while self.last_seq < high:
                changes = reader.changes_since(self.last_seq, 20000)
                if not changes:
                    break
                self._apply(reader, changes)
            if self.dead > max(1024, self.n // 4) or (
                self.live >= 1000 and self.live >= 2 * max(self._mean_n, 1)
            ):
                self._compact()

    def _reload(self, reader: IndexReader) -> None:
        """Load every vector, a block at a time, so memory peaks near the compact size."""
        parts: list[tuple[I64, I64, npt.NDArray[np.uint64], npt.NDArray[np.float16]]] = []
        mean: list[F32] = []

        def block(ids: I64, docs: I64, vectors: F32) -> None:
            if not mean:  # centre on the first block: a large sample of the whole
                mean.append(vectors.mean(axis=0).astype(np.float32))
            parts.append((ids, docs, _codes(vectors, mean[0]), vectors.astype(np.float16)))

        seq = reader.all_vectors(self.dim, block)
        self.n = 0
        self.dead = 0
        total = sum(len(p[0]) for p in parts)
        self._alloc(max(1024, total))
        self._mean = mean[0] if mean else np.zeros(self.dim, np.float32)
        self._mean_n = total
        if total:
            ids = np.concatenate([p[0] for p in parts])
            order = np.argsort(ids, kind="stable")
            self.ids[:total] = ids[order]
            for column, target in ((1, self.docs), (2, self.codes), (3, self.f16)):
                target[:total] = np.concatenate([p[column] for p in parts])[order]
            self.alive[:total] = True
            self.n = total
        self.last_seq = seq
        self.loaded = True

    def _apply(self, reader: IndexReader, changes: list[tuple[int, int, int]]) -> None:
        added = [chunk for _, chunk, was_added in changes if was_added]
        found = reader.vectors_by_ids(added, self.dim) if added else None
        rows = {} if found is None else {int(i): r for r, i in enumerate(found[0])}
        for seq, chunk, was_added in changes:
            if was_added:
                row = rows.get(chunk)
                if row is not None and found is not None:  # gone again by now otherwise
                    self._append(found[0][row:row + 1], found[1][row:row + 1],
                                 found[2][row:row + 1])
            else:
                self._remove(chunk)
            self.last_seq = seq

    def _append(self, ids: I64, docs: I64, vectors: F32) -> None:
        count = len(ids)
        if not count:
            return
        if self.n and ids[0] <= self.ids[self.n - 1]:
            # Chunk ids only grow (AUTOINCREMENT); a replay of one already here is skipped.
            keep = ids > self.ids[self.n - 1]
            ids, docs, vectors = ids[keep], docs[keep], vectors[keep]
            count = len(ids)
            if not count:
                return
        self._grow(self.n + count)
        end = self.n + count
        self.ids[self.n:end] = ids
        self.docs[self.n:end] = docs
        self.alive[self.n:end] = True
        self.codes[self.n:end] = _codes(vectors, self._mean)
        self.f16[self.n:end] = vectors
        self.n = end

    def _remove(self, chunk: int) -> None:
        pos = int(np.searchsorted(self.ids[:self.n], chunk))
        if pos < self.n and self.ids[pos] == chunk and self.alive[pos]:
            self.alive[pos] = False
            self.dead += 1

    def _compact(self) -> None:
        """Drop dead rows and re-centre the codes on the live vectors."""
        keep = np.flatnonzero(self.alive[:self.n])
        ids, docs = self.ids[keep].copy(), self.docs[keep].copy()
        vectors = self.f16[keep].astype(np.float32)
        seq = self.last_seq
        self.n = 0
        self.dead = 0
        self._alloc(max(1024, len(keep)))
        self._mean = vectors.mean(axis=0) if len(keep) else np.zeros(self.dim, np.float32)
        self._mean_n = len(keep)
        self._append(ids, docs, vectors.astype(np.float32))
        self.last_seq = seq

    # -- searching ----------------------------------------------------------------------------

    def search(self, query: F32, k: int, candidates: int,
               allowed_docs: I64 | None = None) -> tuple[I64, F32, I64]:
        """The `k` nearest chunks: (chunk ids, scores, doc ids), best first.

        `candidates` rows survive the 1-bit pass and are rescored with the float16 vectors,
        whose dot products are within about 0.001 of the exact cosine similarity.
        """
        with self._lock:
            n = self.n
            alive = self.alive[:n]
            if allowed_docs is not None:
                alive = alive & np.isin(self.docs[:n], allowed_docs)
            live = int(alive.sum()) if allowed_docs is not None else n - self.dead
            if live == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64)
            if n <= EXACT_SCAN_LIMIT or live <= candidates:
                pool = np.flatnonzero(alive)
            else:
                qcode = _codes(query[None, :], self._mean)[0]
                dist = _hamming(self.codes[:n], qcode)
                dist[~alive] = np.iinfo(np.uint16).max
                # The smallest distances by counting (distances are 0..dim), not by sorting.
                counts = np.bincount(dist, minlength=self.dim + 1)[:self.dim + 1]
                cut = int(np.searchsorted(np.cumsum(counts), candidates))
                pool = np.flatnonzero(dist <= cut)
            scores = self.f16[pool].astype(np.float32) @ query
            take = min(k, len(pool))
            best = np.argpartition(-scores, take - 1)[:take] if take < len(pool) else np.arange(
                len(pool))
            best = best[np.argsort(-scores[best], kind="stable")]
            rows = pool[best]
            return self.ids[rows].copy(), scores[best].astype(np.float32), self.docs[rows].copy()
