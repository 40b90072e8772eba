"""The Hamming pass with faiss's compiled kernel, over a row-major copy of the codes.

The vector file keeps its 1-bit codes bit-sliced (word w of every row together, vecfile.py),
which numpy scans a word at a time: an XOR, a popcount and a sum, three passes over the
data where one would do. faiss's `hammings` does it in one (XOR, popcount and sum per row
in registers), about three times as fast, but it reads each row's words side by side. So
each mapped file gets a copy of its codes row by row in memory (8 bytes a dimension / 64
a row: 48 MB at 1M chunks of 384 dimensions), made in the background when the file is
mapped and extended as rows are appended (rows of a file never change once written; a
rebuilt file is a new mapping with a new copy). Until the copy is there, or where faiss is
not installed, the numpy pass answers: the distances are the same, exact, either way.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]

COPY_ROWS = 65536  # rows transposed a step (their words stay in cache)

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


class RowCodes:
    """Rows [0, rows) of a file's bit-sliced codes, row by row. The buffer is allocated for
    the file's capacity without being touched, so only the rows copied take memory."""

    def __init__(self, capacity: int, words: int) -> None:
        self.buf: U64 = np.empty((capacity, words), dtype=np.uint64)
        self.rows = 0

    def extend(self, sliced: U64, n: int) -> None:
        """Copy rows [rows, n) of `sliced` (words, capacity). Not thread-safe: one caller."""
        for lo in range(self.rows, n, COPY_ROWS):
            hi = min(n, lo + COPY_ROWS)
            self.buf[lo:hi] = sliced[:, lo:hi].T
        self.rows = max(self.rows, n)


def hamming_into(faiss: Any, codes: RowCodes, qcode: U64, start: int, end: int,
                 out: I32) -> None:
    """Distances of rows [start, end) to `qcode` into `out` (end - start int32s; faiss lets
    go of the GIL, so two threads share a pass)."""
    if end <= start:
        return
    query = np.ascontiguousarray(qcode).view(np.uint8)
    rows = codes.buf[start:end].view(np.uint8)
    faiss.hammings(faiss.swig_ptr(query), faiss.swig_ptr(rows), 1, end - start,
                   query.shape[0], faiss.swig_ptr(out))
