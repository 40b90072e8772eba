"""Scanning vector columns for the nearest rows to a query, in three passes.

1. Hamming: every row's 1-bit code (the sign of each dimension after centring on a mean)
   against the query's, over bit-sliced columns (word w of every row side by side), so each
   step is a flat XOR and popcount over a block that stays in cache. Two threads above
   PARALLEL_ROWS (numpy releases the GIL). A histogram of the distances gives the cut that
   keeps `shortlist` rows without sorting.
2. Asymmetric: the shortlist is ranked by the query's own values (quantised to 4 bits, as
   bit planes) against each row's code bits, a far better estimate of the cosine than
   Hamming distance, and `candidates` rows are kept.
3. float16: the candidates are scored with their float16 vectors (within about 0.001 of
   the exact cosine) and the best `k` returned.

Pure functions of numpy arrays: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
U64 = npt.NDArray[np.uint64]
T = TypeVar("T")

BLOCK = 32768  # rows per step of the Hamming pass: its buffers stay in the core's cache
PARALLEL_ROWS = 100_000  # above this many rows, two threads share the Hamming pass
PLANES = 4  # bits of the query's quantised values in the asymmetric pass

_pool: ThreadPoolExecutor | None = None


def _both(fn: Callable[[int, int], T], n: int) -> list[T]:
    """`fn(start, end)` over [0, n), split in two halves on two threads when n is large."""
    global _pool
    if n < PARALLEL_ROWS:
        return [fn(0, n)]
    if _pool is None:
        _pool = ThreadPoolExecutor(2, thread_name_prefix="pocketmcp.scan")
    half = (n // 2 + BLOCK - 1) // BLOCK * BLOCK
    return list(_pool.map(fn, (0, half), (half, n)))


def words(dim: int) -> int:
    """64-bit words of a code (the last one padded with zeros)."""
    return (dim + 63) // 64


def _packed(bits: npt.NDArray[np.bool_]) -> U64:
    """Rows of bits as rows of 64-bit words, zero-padded."""
    packed = np.packbits(bits, axis=1)
    wide = np.zeros((len(packed), words(bits.shape[1]) * 8), dtype=np.uint8)
    wide[:, :packed.shape[1]] = packed
    codes: U64 = wide.view(np.uint64)
    return codes


def encode(vectors: F32, mean: F32) -> U64:
    """1-bit codes of rows of `vectors` (n, dim) centred on `mean`: (n, words) uint64.

    Callers pass vectors already rounded to float16, so a row's code never depends on
    whether it came from the database or from the file."""
    return _packed(vectors - mean > 0)


def hamming(sliced: U64, n: int, qcode: U64, alive: U8 | None) -> tuple[U16, I64]:
    """Distances of rows [0, n) of bit-sliced `sliced` (words, capacity) to `qcode`, and
    their histogram. Rows whose `alive` byte is 0 get distance dim + 1."""
    count = len(qcode)
    dim = count * 64
    dist = np.empty(n, dtype=np.uint16)

    def part(start: int, end: int) -> I64:
        hist = np.zeros(dim + 2, dtype=np.int64)
        tmp = np.empty(min(BLOCK, end - start), dtype=np.uint64)
        ones = np.empty(len(tmp), dtype=np.uint8)
        for lo in range(start, end, BLOCK):
            hi = min(end, lo + BLOCK)
            m = hi - lo
            acc = dist[lo:hi]
            t, o = tmp[:m], ones[:m]
            np.bitwise_xor(sliced[0, lo:hi], qcode[0], out=t)
            np.bitwise_count(t, out=o)
            acc[:] = o
            for w in range(1, count):
                np.bitwise_xor(sliced[w, lo:hi], qcode[w], out=t)
                np.bitwise_count(t, out=o)
                np.add(acc, o, out=acc)
            if alive is not None:
                np.putmask(acc, alive[lo:hi] == 0, dim + 1)
            hist += np.bincount(acc, minlength=dim + 2)
        return hist

    hists = _both(part, n)
    return dist, np.sum(hists, axis=0)


def within(dist: U16, hist: I64, keep: int) -> I64:
    """Rows (ascending) whose distance is at most the smallest cut keeping `keep` rows."""
    live = hist[:-1]  # the last bin holds the dead rows
    cut = int(np.searchsorted(np.cumsum(live), min(keep, int(live.sum()))))
    parts = _both(lambda s, e: np.flatnonzero(dist[s:e] <= cut) + s, len(dist))
    rows: I64 = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return rows.astype(np.int64, copy=False)


def query_planes(query: F32, mean: F32) -> tuple[U64, float, float]:
    """The centred query quantised to 4 bits a dimension, as PLANES bit planes of packed
    words, with its offset and step: value_i ~ low + step * sum_j 2^j plane_j[i]."""
    centred = query - mean
    low = float(centred.min())
    step = float(centred.max() - low) / (2**PLANES - 1) or 1.0
    levels = np.rint((centred - low) / step).astype(np.uint8)
    planes = _packed(np.stack([(levels >> j) & 1 for j in range(PLANES)]).astype(bool))
    return planes, low, step


def asymmetric(sliced: U64, rows: I64, planes: U64, low: float, step: float) -> F32:
    """Estimated (centred) dot products of the query with rows `rows`, from their codes."""
    ones = np.zeros(len(rows), dtype=np.uint16)
    weighted = np.zeros(len(rows), dtype=np.uint32)
    for w in range(sliced.shape[0]):
        code = sliced[w].take(rows)
        ones += np.bitwise_count(code)
        for j in range(PLANES):
            weighted += np.bitwise_count(code & planes[j, w]).astype(np.uint32) << j
    # sum_i q_i s_i with s_i = +-1 is 2 sum_i q_i b_i - sum_i q_i; the last term is the same
    # for every row.
    out: F32 = (low * ones + step * weighted).astype(np.float32)
    return out


def top(scores: F32, k: int) -> I64:
    """Positions of the `k` largest scores, best first (ties in position order)."""
    take = min(k, len(scores))
    if take == 0:
        return np.zeros(0, dtype=np.int64)
    best = np.argpartition(-scores, take - 1)[:take] if take < len(scores) else np.arange(
        len(scores))
    order: I64 = best[np.argsort(-scores[best], kind="stable")].astype(np.int64)
    return order


def dot16(f16: npt.NDArray[np.float16], rows: I64 | slice, query: F32) -> F32:
    """Dot products of `query` with float16 rows (gathered a block at a time)."""
    if isinstance(rows, slice):
        picked = f16[rows]
        out: F32 = np.empty(len(picked), dtype=np.float32)
        for lo in range(0, len(picked), 4096):
            np.matmul(picked[lo:lo + 4096].astype(np.float32), query, out=out[lo:lo + 4096])
        return out
    out = np.empty(len(rows), dtype=np.float32)
    for lo in range(0, len(rows), 4096):
        part = rows[lo:lo + 4096]
        np.matmul(f16.take(part, axis=0).astype(np.float32), query, out=out[lo:lo + len(part)])
    return out


def merge(parts: Sequence[tuple[I64, F32, I64]], k: int) -> tuple[I64, F32, I64]:
    """The best `k` of several (ids, scores, doc ids) lists."""
    if len(parts) == 1:
        return parts[0]
    ids = np.concatenate([p[0] for p in parts])
    scores = np.concatenate([p[1] for p in parts])
    docs = np.concatenate([p[2] for p in parts])
    best = top(scores, k)
    return ids[best], scores[best], docs[best]
