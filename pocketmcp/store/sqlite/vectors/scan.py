"""Scanning vector columns for the nearest rows to a query, in three passes.

1. Hamming: every row's 1-bit code (the sign of each dimension after centring on a mean)
   against the query's, over bit-sliced columns (word w of every row side by side), so each
   step is a flat XOR and popcount over a block that stays in cache. Two threads above
   PARALLEL_ROWS when the caller lends them (numpy releases the GIL). A histogram of the
   distances gives the cut that keeps `shortlist` rows without sorting (of the rows under a
   bound guessed from a sample).
2. Asymmetric: the shortlist is ranked by the query's own values (quantised to 4 bits, as
   bit planes) against each row's code bits, a far better estimate of the cosine than
   Hamming distance, and `candidates` rows are kept.
3. float16: the candidates are scored with their float16 vectors (within about 0.001 of
   the exact cosine) and the best `k` returned.

Functions of numpy arrays: no I/O.
The threads a pass is shared by belong to the caller (`pool`: its index's, threads.py);
without them a pass runs in the calling thread alone, the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from pocketmcp.blas import one_blas_thread
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.vectors.rowcodes import (
    F32,
    I64,
    SAMPLE,
    U8,
    U16,
    U64,
    RowCodes,
    kernel,
    loaded,
    widen_f16,
)

T = TypeVar("T")

BLOCK = 32768  # rows per step of the Hamming pass: its buffers stay in the core's cache
PARALLEL_ROWS = 100_000  # above this many rows, two threads share the Hamming pass
PLANES = 4  # bits of the query's quantised values in the asymmetric pass

PIECES = 8  # pieces of a parallel pass: a thread slowed by other work takes fewer of them

# float16 bit patterns to float32: a lookup is twice as fast as numpy's float16 cast
# (and gives the same values).
_F16_TO_F32 = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)


def _both(fn: Callable[[int, int], T], n: int, pool: Threads | None) -> list[T]:
    """`fn(start, end)` over [0, n) in order: in PIECES pieces shared by the `pool`'s two
    threads when n is large (each thread takes the next piece when it is done with one, so a
    core busy with other work, the keyword query or the query embedding, holds up less than
    half); in one piece on the calling thread without a pool."""
    if n < PARALLEL_ROWS or pool is None:
        return [fn(0, n)]
    step = (n // PIECES + BLOCK - 1) // BLOCK * BLOCK
    return pool.map(fn, [(s, min(n, s + step)) for s in range(0, n, step)])


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


def hamming(sliced: U64, n: int, qcode: U64, alive: U8 | None,
            rows: RowCodes | None = None, *, pool: Threads | None = None) -> U16:
    """Distances of rows [0, n) of bit-sliced `sliced` (words, capacity) to `qcode`. Rows
    whose `alive` byte is 0 get distance dim + 1. With `rows`, a row-major copy of at least
    n rows, faiss's kernel computes them (rowcodes.py); the same distances."""
    count = len(qcode)
    dead = count * 64 + 1
    dist = np.empty(n, dtype=np.uint16)
    wanted = qcode[:, None]
    faiss = kernel() if rows is not None and rows.rows >= n else None

    def compiled(start: int, end: int) -> None:
        assert rows is not None
        out = np.empty(end - start, dtype=np.int32)
        rows.distances(faiss, qcode, start, end, out)
        np.copyto(dist[start:end], out, casting="unsafe")
        if alive is not None:
            np.putmask(dist[start:end], alive[start:end] == 0, dead)

    if faiss is not None:
        _both(compiled, n, pool)
        return dist

    def part(start: int, end: int) -> None:
        tmp = np.empty((count, min(BLOCK, end - start)), dtype=np.uint64)
        ones = np.empty(tmp.shape, dtype=np.uint8)
        for lo in range(start, end, BLOCK):
            hi = min(end, lo + BLOCK)
            t, o = tmp[:, :hi - lo], ones[:, :hi - lo]
            # All words of the block at once: three numpy calls instead of three per word.
            np.bitwise_xor(sliced[:, lo:hi], wanted, out=t)
            np.bitwise_count(t, out=o)
            np.add.reduce(o, axis=0, dtype=np.uint16, out=dist[lo:hi])
            if alive is not None:
                np.putmask(dist[lo:hi], alive[lo:hi] == 0, dead)

    _both(part, n, pool)
    return dist


def within(dist: U16, keep: int, dead: int, *, pool: Threads | None = None) -> I64:
    """Rows (ascending) whose distance is at most the smallest cut that keeps `keep` rows
    (all of them when fewer are left); rows at distance `dead` are never kept.

    The cut is read off a histogram of the rows under an upper bound guessed from every
    SAMPLE-th row, so the histogram counts a few times `keep` rows rather than all of them;
    when the guess keeps too few, the histogram of every row decides (the same cut)."""
    sample = np.bincount(dist[::SAMPLE], minlength=dead + 1)[:dead]
    guess = int(np.searchsorted(np.cumsum(sample), keep * 1.5 / SAMPLE + 64))
    if guess < dead:
        rows = _at_most(dist, guess, pool)
        if len(rows) >= keep:
            hist = np.bincount(dist[rows], minlength=guess + 1)
            cut = int(np.searchsorted(np.cumsum(hist), keep))
            return rows[dist[rows] <= cut] if cut < guess else rows
    live = np.bincount(dist, minlength=dead + 1)[:dead]
    cut = int(np.searchsorted(np.cumsum(live), min(keep, int(live.sum()))))
    return _at_most(dist, min(cut, dead - 1), pool)


def shortlist(copy: RowCodes, n: int, qcode: U64, keep: int, dead: int,
              alive: U8 | None = None, ok: npt.NDArray[np.bool_] | None = None, *,
              pool: Threads | None = None) -> I64 | None:
    """The rows `within` keeps (ascending) of rows [0, n) of the row-major `copy`, without
    making every distance: the cut's upper bound is guessed from the copy's sample, and each
    piece of the pass keeps only the rows under it while its distances are in cache. Rows
    whose `alive` byte is 0 or whose `ok` is False are left out. None when the guess keeps
    too few rows (then the caller makes every distance and cuts them with `within`)."""
    faiss = loaded()
    if faiss is None or copy.rows < n:
        return None
    picked = np.arange(0, n, SAMPLE)
    sampled = np.empty(len(picked), dtype=np.int32)
    copy.distances(faiss, qcode, 0, len(picked), sampled, sampled=True)
    if alive is not None:
        sampled[alive[picked] == 0] = dead
    if ok is not None:
        sampled[~ok[picked]] = dead
    counts = np.bincount(sampled, minlength=dead + 1)[:dead]
    guess = int(np.searchsorted(np.cumsum(counts), keep * 1.5 / SAMPLE + 64))
    if guess >= dead:
        return None

    def part(start: int, end: int) -> tuple[I64, npt.NDArray[np.int32]]:
        out = np.empty(end - start, dtype=np.int32)
        copy.distances(faiss, qcode, start, end, out)
        under = out <= guess
        if alive is not None:
            under &= alive[start:end] != 0
        if ok is not None:
            under &= ok[start:end]
        found = np.flatnonzero(under)
        return found + start, out[found]

    parts = _both(part, n, pool)
    rows = np.concatenate([p[0] for p in parts])
    dist = np.concatenate([p[1] for p in parts])
    if len(rows) < keep:
        return None
    cut = int(np.searchsorted(np.cumsum(np.bincount(dist, minlength=guess + 1)), keep))
    kept: I64 = rows[dist <= cut] if cut < guess else rows
    return kept.astype(np.int64, copy=False)


def _at_most(dist: U16, cut: int, pool: Threads | None) -> I64:
    parts = _both(lambda s, e: np.flatnonzero(dist[s:e] <= cut) + s, len(dist), pool)
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


def asymmetric(sliced: U64, rows: I64, planes: U64, low: float, step: float,
               copy: RowCodes | None = None) -> F32:
    """Estimated (centred) dot products of the query with rows `rows`, from their codes
    (gathered from the row-major `copy` when it holds them: one cache line a row instead of
    one a word; then faiss counts the bits of all planes in one call a part)."""
    ones = np.zeros(len(rows), dtype=np.uint16)
    weighted = np.zeros(len(rows), dtype=np.uint32)
    gathered = None
    if copy is not None and len(rows) and int(rows[-1]) < copy.rows:  # rows ascend
        faiss = loaded()
        if faiss is not None:
            # popcount(code & plane) = (popcount(code) + popcount(plane) - hamming) / 2
            dist = copy.plane_counts(faiss, rows, planes)
            ones32 = dist[-1]
            for j in range(len(planes)):
                both = ones32 + int(np.bitwise_count(planes[j]).sum()) - dist[j]
                weighted += (both >> 1).astype(np.uint32) << j
            ones = ones32.astype(np.uint16)
            return _estimate(ones, weighted, low, step)
        gathered = np.ascontiguousarray(copy.take(rows).T)
    for w in range(sliced.shape[0]):
        code = gathered[w] if gathered is not None else sliced[w].take(rows)
        ones += np.bitwise_count(code)
        for j in range(PLANES):
            weighted += np.bitwise_count(code & planes[j, w]).astype(np.uint32) << j
    return _estimate(ones, weighted, low, step)


def _estimate(ones: U16, weighted: npt.NDArray[np.uint32], low: float, step: float) -> F32:
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


def dot16(f16: npt.NDArray[np.float16], rows: I64, query: F32) -> F32:
    """Dot products of `query` with float16 rows (gathered a block at a time)."""
    bits = f16.view(np.uint16)
    out: F32 = np.empty(len(rows), dtype=np.float32)
    faiss = loaded()
    with one_blas_thread():
        for lo in range(0, len(rows), 4096):
            part = rows[lo:lo + 4096]
            if faiss is not None:
                wide = widen_f16(faiss, f16.take(part, axis=0))
            else:
                wide = _F16_TO_F32.take(bits.take(part, axis=0))
            # Row by row (not a matrix product, whose rounding of a row depends on the rows
            # beside it): a chunk scores the same whatever else is scored with it.
            np.vecdot(wide, query, out=out[lo:lo + len(part)])
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
