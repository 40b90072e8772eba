"""The Hamming pass with faiss's compiled kernel, over a row-major copy of the codes.

The vector file keeps its 1-bit codes bit-sliced (word w of every row together, vecfile.py),
which numpy scans a word at a time: an XOR, a popcount and a sum, three passes over the
data where one would do. faiss's `hammings` does it in one (XOR, popcount and sum per row
in registers), about three times as fast, but it reads each row's words side by side. So
each mapped file gets a copy of its codes row by row in memory (one bit a dimension: 48 MB
at 1M chunks of 384 dimensions, kept in parts of widths the kernel is fast at), made in
the background when the file is mapped and extended as rows are appended (rows of a file
never change once written; a rebuilt file is a new mapping with a new copy). Until the copy
is there, or where faiss is not installed, the numpy pass answers: the distances are the
same, exact, either way.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

# The arrays of the vector file's passes (index.py, scan.py).
F16 = npt.NDArray[np.float16]
F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
U64 = npt.NDArray[np.uint64]

COPY_ROWS = 65536  # rows transposed a step (their words stay in cache)
SAMPLE = 16  # every SAMPLE-th row guesses where the shortlist's cut lies (scan.py)

_faiss: ModuleType | None = None
_tried = False
_import_lock = threading.Lock()


def kernel() -> ModuleType | None:
    """faiss, imported at first use (about 0.1 s; never at start-up), or None when it is not
    installed or does not load."""
    global _faiss, _tried
    with _import_lock:
        if not _tried:
            _tried = True
            try:
                import faiss  # heavy optional kernel: imported at first use only

                _faiss = faiss
            except Exception:  # a wheel that does not load here: the numpy pass answers
                _faiss = None
        return _faiss


def loaded() -> ModuleType | None:
    """faiss if it has been imported already (by the thread that maps a vector file), else
    None: for passes that may run before then and must not wait for the import."""
    return _faiss


def widths(words: int) -> list[int]:
    """Words in each part of a row as RowCodes keeps it: faiss's kernel has a fast path for
    codes of 1, 2, 4 and 8 words only, and runs a general loop, twice as slow a byte, for any
    other size. So a 6-word code (384 dimensions) is kept as a 4-word part and a 2-word part
    (their distances added), not padded to 8 words (a third more to read)."""
    parts: list[int] = []
    left = words
    for width in (8, 4, 2, 1):
        while left >= width:
            parts.append(width)
            left -= width
    return parts


class RowCodes:
    """Rows [0, rows) of a file's bit-sliced codes, row by row in parts (`widths`), and every
    SAMPLE-th of them side by side (the shortlist's first guess reads those alone). The
    buffers are allocated for the file's capacity without being touched, so only the rows
    copied take memory."""

    def __init__(self, capacity: int, words: int) -> None:
        self.spans: list[tuple[int, int]] = []  # (first word, width) of each part
        for width in widths(words):
            first = self.spans[-1][0] + self.spans[-1][1] if self.spans else 0
            self.spans.append((first, width))
        sampled = (capacity + SAMPLE - 1) // SAMPLE
        self.parts: list[U64] = [np.empty((capacity, w), dtype=np.uint64) for _, w in self.spans]
        self.samples: list[U64] = [np.empty((sampled, w), dtype=np.uint64)
                                   for _, w in self.spans]
        self.rows = 0

    def extend(self, sliced: U64, n: int) -> None:
        """Copy rows [rows, n) of `sliced` (words, capacity). Not thread-safe: one caller."""
        start = self.rows
        for lo in range(start, n, COPY_ROWS):
            hi = min(n, lo + COPY_ROWS)
            for (first, width), part in zip(self.spans, self.parts, strict=True):
                part[lo:hi] = sliced[first:first + width, lo:hi].T
        first = (start + SAMPLE - 1) // SAMPLE
        for part, sample in zip(self.parts, self.samples, strict=True):
            sample[first:(n + SAMPLE - 1) // SAMPLE] = part[first * SAMPLE:n:SAMPLE]
        self.rows = max(self.rows, n)

    def take(self, rows: npt.NDArray[np.int64]) -> U64:
        """The codes of `rows` (copied), whole: (len(rows), words)."""
        taken = [part.take(rows, axis=0) for part in self.parts]
        return taken[0] if len(taken) == 1 else np.concatenate(taken, axis=1)

    def nbytes(self, n: int) -> int:
        """Bytes the copy of rows [0, n) takes."""
        return sum(part[:n].nbytes for part in self.parts)

    def distances(self, faiss: Any, qcode: U64, start: int, end: int, out: I32,
                  sampled: bool = False) -> None:
        """Hamming distances of rows [start, end) to `qcode` into `out` (end - start int32s),
        of the sample's rows when `sampled`. faiss lets go of the GIL, so two threads share a
        pass."""
        if end <= start:
            return
        parts = zip(self.spans, self.samples if sampled else self.parts, strict=True)
        (first, width), part = next(parts)
        hammings_of(faiss, qcode[first:first + width], part[start:end], out)
        spare: I32 | None = None
        for (first, width), part in parts:
            if spare is None:
                spare = np.empty(end - start, dtype=np.int32)
            hammings_of(faiss, qcode[first:first + width], part[start:end], spare)
            out += spare

    def plane_counts(self, faiss: Any, rows: I64, planes: U64) -> I32:
        """`code_counts` of the codes of `rows` against `planes`, part by part (distances
        over a row's words are the sums of those over its parts)."""
        total: I32 | None = None
        for (first, width), part in zip(self.spans, self.parts, strict=True):
            counts = code_counts(faiss, part.take(rows, axis=0), planes[:, first:first + width])
            total = counts if total is None else total + counts
        assert total is not None
        return total


def code_counts(faiss: Any, gathered: U64, planes: U64) -> I32:
    """For rows of codes `gathered` (rows, words) and bit planes `planes` (planes, words):
    the Hamming distance of each row to each plane and, in the last row, to zero (the row's
    count of ones), as a (planes + 1, rows) array, in one compiled call."""
    wanted = np.zeros((len(planes) + 1, planes.shape[1]), dtype=np.uint64)
    wanted[:len(planes)] = planes
    rows = np.ascontiguousarray(gathered)
    out = np.empty((len(wanted), len(rows)), dtype=np.int32)
    if len(rows):
        faiss.hammings(faiss.swig_ptr(wanted.view(np.uint8)), faiss.swig_ptr(rows.view(np.uint8)),
                       len(wanted), len(rows), wanted.shape[1] * 8, faiss.swig_ptr(out))
    return out


_halves: dict[int, Any] = {}


def widen_f16(faiss: Any, rows: npt.NDArray[np.float16]) -> npt.NDArray[np.float32]:
    """float16 rows (n, dim) as float32, by faiss's compiled conversion (about three times
    as fast as numpy's here; the same values: every float16 is exactly a float32).

    The conversion is faiss's one OpenMP parallel region among the calls made here; it runs
    on the calling thread alone (OpenMP's thread count is kept per thread, so it is set on
    each call). With OpenMP's own threads, they went on spinning on the other core for
    milliseconds after each conversion, and the next Hamming pass or the keyword query
    beside it waited for that core: the vector stage at 1M chunks took 8.3 / 12.0 ms p50 /
    p95 so, 5.5 / 6.5 ms without."""
    faiss.omp_set_num_threads(1)
    dim = rows.shape[1]
    quantizer = _halves.get(dim)
    if quantizer is None:
        quantizer = _halves[dim] = faiss.ScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16)
    src = np.ascontiguousarray(rows)
    out = np.empty(rows.shape, dtype=np.float32)
    if len(src):
        quantizer.decode_c(faiss.swig_ptr(src.view(np.uint8)), faiss.swig_ptr(out), len(src))
    return out


def hammings_of(faiss: Any, query: U64, rows: U64, out: I32) -> None:
    """Distances of row-major codes `rows` (n, words) to `query` into `out` (n int32s)."""
    if len(rows):
        q = np.ascontiguousarray(query).view(np.uint8)
        faiss.hammings(faiss.swig_ptr(q), faiss.swig_ptr(rows.view(np.uint8)), 1, len(rows),
                       q.shape[0], faiss.swig_ptr(out))
