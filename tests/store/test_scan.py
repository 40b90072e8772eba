"""The vector scan's passes against plain numpy computations of the same thing."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest

from pocketmcp.blas import one_blas_thread
from pocketmcp.store.sqlite.threads import Threads
from pocketmcp.store.sqlite.vectors import scan
from pocketmcp.store.sqlite.vectors.rowcodes import RowCodes, code_counts, kernel, widen_f16, widths


def _cut_rows(dist: npt.NDArray[np.uint16], keep: int, dead: int) -> npt.NDArray[np.int64]:
    """The rows the shortlist keeps, by the rule itself: every live row at or under the
    smallest distance that keeps `keep` of them (all live rows when fewer)."""
    live = np.sort(dist[dist < dead])
    if not len(live):
        return np.zeros(0, np.int64)
    cut = live[min(keep, len(live)) - 1]
    return np.flatnonzero((dist <= cut) & (dist < dead))


@pytest.fixture
def pool() -> Iterator[Threads]:
    """The two threads an index lends its vector passes."""
    threads = Threads(2, "pocketmcp.scan")
    try:
        yield threads
    finally:
        threads.close()


def test_the_shortlist_cut_is_the_same_whether_the_sampled_guess_holds_or_not(
        pool: Threads) -> None:
    rng = np.random.default_rng(3)
    dead = 385
    for n, keep, spread in ((150_000, 20_000, 60), (150_000, 149_000, 60), (5000, 100, 3),
                            (3000, 5000, 40), (200_000, 2000, 200)):
        dist = rng.normal(192, spread, n).clip(0, 384).astype(np.uint16)
        dist[rng.random(n) < 0.1] = dead  # rows left out
        assert np.array_equal(scan.within(dist, keep, dead, pool=pool),
                              _cut_rows(dist, keep, dead))
        assert np.array_equal(scan.within(dist, keep, dead), _cut_rows(dist, keep, dead))
    # A skewed tail the sample misses: the guess keeps too few, every row decides.
    dist = np.full(120_000, 300, np.uint16)
    dist[::17] = 10
    assert np.array_equal(scan.within(dist, 60_000, dead, pool=pool),
                          _cut_rows(dist, 60_000, dead))
    assert not len(scan.within(np.full(10, dead, np.uint16), 5, dead))


def test_hamming_distances_over_two_threads_equal_a_bit_count_of_each_row(
        pool: Threads) -> None:
    rng = np.random.default_rng(4)
    n, words = scan.PARALLEL_ROWS + 12_345, 6  # past PARALLEL_ROWS: shared by two threads
    codes = rng.integers(0, 2**63, (n, words), dtype=np.uint64)
    sliced = np.ascontiguousarray(codes.T)
    qcode = rng.integers(0, 2**63, words, dtype=np.uint64)
    alive = (rng.random(n) > 0.05).astype(np.uint8)
    dist = scan.hamming(sliced, n, qcode, alive, pool=pool)
    expected = np.bitwise_count(codes ^ qcode).sum(axis=1)
    expected[alive == 0] = words * 64 + 1
    assert np.array_equal(dist, expected)
    assert np.array_equal(scan.hamming(sliced, n, qcode, alive), expected)  # one thread
    # faiss's kernel over a row-major copy, made in two steps as rows are appended.
    assert kernel() is not None
    copy = RowCodes(n + 100, words)
    copy.extend(sliced, n // 3)  # shorter than n rows: numpy answers
    assert scan.hamming(sliced, n, qcode, alive, copy, pool=pool).sum() == dist.sum()
    copy.extend(sliced, n)
    assert np.array_equal(copy.take(np.arange(n)), codes)
    assert np.array_equal(scan.hamming(sliced, n, qcode, alive, copy, pool=pool), expected)
    assert np.array_equal(scan.hamming(sliced, n, qcode, alive, copy), expected)


def test_float16_scores_are_the_products_of_the_float16_rows() -> None:
    rng = np.random.default_rng(5)
    f16 = rng.normal(0, 0.05, (5000, 384)).astype(np.float16)
    query = rng.normal(0, 0.05, 384).astype(np.float32)
    rows = np.sort(rng.choice(5000, 4500, replace=False)).astype(np.int64)
    exact = f16[rows].astype(np.float64) @ query.astype(np.float64)
    assert np.abs(scan.dot16(f16, rows, query) - exact).max() < 1e-6
    with one_blas_thread(), one_blas_thread():  # nested: restored in turn
        inside = f16[rows].astype(np.float32) @ query
    assert np.abs(inside - exact).max() < 1e-6


def test_a_rows_float16_score_is_the_same_whatever_rows_are_scored_with_it() -> None:
    """A copy of an index numbers its chunks anew, so a chunk is scored beside other rows:
    its score must not change with them (a matrix product's rounding does)."""
    rng = np.random.default_rng(7)
    f16 = rng.normal(0, 0.05, (40, 384)).astype(np.float16)
    query = rng.normal(0, 0.05, 384).astype(np.float32)
    every = scan.dot16(f16, np.arange(40, dtype=np.int64), query)
    for lo in range(40):
        for hi in (lo + 1, min(40, lo + 3), min(40, lo + 7), 40):
            some = scan.dot16(f16, np.arange(lo, hi, dtype=np.int64), query)
            assert np.array_equal(some, every[lo:hi]), (lo, hi)


def test_float16_scores_are_the_same_with_faiss_widening_the_rows_or_numpy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    f16 = rng.normal(0, 0.05, (6000, 384)).astype(np.float16)
    query = rng.normal(0, 0.05, 384).astype(np.float32)
    rows = np.sort(rng.choice(6000, 5000, replace=False)).astype(np.int64)
    assert kernel() is not None
    compiled = scan.dot16(f16, rows, query)
    monkeypatch.setattr(scan, "loaded", lambda: None)
    assert np.array_equal(compiled, scan.dot16(f16, rows, query))


def test_the_asymmetric_estimate_is_the_same_from_faiss_counts_and_numpy_bit_planes() -> None:
    rng = np.random.default_rng(7)
    n, dim = 3000, 384
    vectors = rng.normal(0, 1, (n, dim)).astype(np.float32)
    mean = vectors.mean(axis=0)
    codes = scan.encode(vectors, mean)
    sliced = np.ascontiguousarray(codes.T)
    query = rng.normal(0, 1, dim).astype(np.float32)
    planes, low, step = scan.query_planes(query, mean)
    rows = np.sort(rng.choice(n, 700, replace=False)).astype(np.int64)
    assert kernel() is not None
    copy = RowCodes(n, codes.shape[1])
    copy.extend(sliced, n)
    numpy_side = scan.asymmetric(sliced, rows, planes, low, step)  # word by word, numpy
    assert np.array_equal(scan.asymmetric(sliced, rows, planes, low, step, copy), numpy_side)
    # And the estimate is what it claims: the query's quantised values against each row's
    # signs, up to the term every row shares.
    levels = np.rint((query - mean - low) / step)
    values = low + step * levels
    bits = np.unpackbits(codes.view(np.uint8), axis=1)[:, :dim].astype(np.float64)
    assert np.allclose(numpy_side, bits[rows] @ values, rtol=1e-5, atol=1e-3)


def test_the_fused_shortlist_keeps_the_rows_the_cut_over_every_distance_keeps(
        pool: Threads, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    # Over PARALLEL_ROWS (lowered, so the rows are made within a second): two threads share
    # the pass.
    monkeypatch.setattr(scan, "PARALLEL_ROWS", 10_000)
    n, dim = 12_000, 384
    centres = rng.normal(0, 1, (40, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, 40, n)] + rng.normal(0, 0.8, (n, dim)).astype(np.float32)
    mean = vectors.mean(axis=0)
    codes = scan.encode(vectors, mean)
    sliced = np.ascontiguousarray(codes.T)
    qcode = scan.encode(centres[3][None, :], mean)[0]
    dead = codes.shape[1] * 64 + 1
    assert kernel() is not None
    copy = RowCodes(n + 50, codes.shape[1])
    copy.extend(sliced, n // 2 + 7)  # in two steps, as rows are appended
    copy.extend(sliced, n)
    assert np.array_equal(np.concatenate([s[:(n + 15) // 16] for s in copy.samples], axis=1),
                          codes[::16])
    alive = (rng.random(n) > 0.1).astype(np.uint8)
    ok = (rng.random(n) > 0.5) & (alive == 1)
    for keep in (200, 2000):
        for live, allowed in ((None, None), (alive, None), (None, ok)):
            dist = scan.hamming(sliced, n, qcode, live)
            if allowed is not None:
                dist[~allowed] = dead
            fused = scan.shortlist(copy, n, qcode, keep, dead, live, allowed, pool=pool)
            assert fused is not None and len(fused) >= keep
            assert np.array_equal(fused, _cut_rows(dist, keep, dead))
            alone = scan.shortlist(copy, n, qcode, keep, dead, live, allowed)  # one thread
            assert alone is not None and np.array_equal(alone, fused)
    # More rows asked for than any bound the sample gives: the caller cuts every distance.
    assert scan.shortlist(copy, n, qcode, n, dead) is None
    assert scan.shortlist(copy, n + 10, qcode, 100, dead) is None  # the copy is behind


@pytest.mark.parametrize("words", [1, 3, 6, 12, 13, 24])
def test_row_copies_in_parts_give_the_distances_of_the_whole_codes(words: int) -> None:
    rng = np.random.default_rng(20 + words)
    n = 5000
    codes = rng.integers(0, 2**64 - 1, (n, words), dtype=np.uint64, endpoint=True)
    qcode = rng.integers(0, 2**64 - 1, words, dtype=np.uint64, endpoint=True)
    faiss = kernel()
    assert faiss is not None
    copy = RowCodes(n, words)
    assert [w for _, w in copy.spans] == widths(words)
    assert all(w in (1, 2, 4, 8) for w in widths(words)) and sum(widths(words)) == words
    copy.extend(np.ascontiguousarray(codes.T), n)
    assert copy.nbytes(n) == codes.nbytes
    out = np.empty(n - 7, dtype=np.int32)
    copy.distances(faiss, qcode, 7, n, out)
    assert np.array_equal(out, np.bitwise_count(codes[7:] ^ qcode).sum(axis=1))
    sampled = np.empty((n + 15) // 16, dtype=np.int32)
    copy.distances(faiss, qcode, 0, len(sampled), sampled, sampled=True)
    assert np.array_equal(sampled, np.bitwise_count(codes[::16] ^ qcode).sum(axis=1))
    rows = np.sort(rng.choice(n, 300, replace=False)).astype(np.int64)
    planes = rng.integers(0, 2**64 - 1, (4, words), dtype=np.uint64, endpoint=True)
    assert np.array_equal(copy.plane_counts(faiss, rows, planes),
                          code_counts(faiss, codes[rows], planes))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_faiss_widens_float16_rows_on_the_calling_thread_alone() -> None:
    faiss = kernel()
    assert faiss is not None
    rows = np.random.default_rng(9).normal(0, 0.05, (3000, 384)).astype(np.float16)
    seen: list[tuple[int, bool, int]] = []

    def widen() -> None:
        before = len(os.listdir("/proc/self/task"))
        wide = widen_f16(faiss, rows)
        seen.append((faiss.omp_get_max_threads(), np.array_equal(wide, rows.astype(np.float32)),
                     len(os.listdir("/proc/self/task")) - before))

    thread = threading.Thread(target=widen)
    thread.start()
    thread.join()
    # One OpenMP thread (none of its own to spin beside the passes), and no thread started.
    assert seen == [(1, True, 0)]
