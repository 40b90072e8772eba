"""Writing a vector file anew from a snapshot of SQLite (the writer's repair, vecwriter.py),
and the helpers that and compaction share."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from pocketmcp.errors import VectorFileError
from pocketmcp.store.sqlite.log import ChunkLog
from pocketmcp.store.sqlite.vectors.file import Columns, State, create_columns, staging_path

I64 = npt.NDArray[np.int64]

MIN_CAPACITY = 1024
BLOCK = 16384  # rows copied at a time when a file is written anew


def capacity_for(rows: int) -> int:
    """Room for `rows` and at least an eighth more, a power of two."""
    return max(MIN_CAPACITY, 1 << (rows + rows // 8).bit_length())


class Stopped(Exception):
    """The repair was asked to stop."""


def discard(cols: Columns) -> None:
    """Close a file that was never installed and remove it."""
    cols.close()
    if cols.staging is not None:
        cols.staging.unlink(missing_ok=True)


def log_entry(source: ChunkLog, seq: int) -> tuple[int, int]:
    found = source.entry(seq) if seq else None
    return found if found is not None else (-1, 0)


class Build:
    """A new file filled from a snapshot's blocks, in chunk id order."""

    def __init__(self, path: Path, dim: int, token: bytes, stop: threading.Event) -> None:
        self.path, self.dim, self.token, self.stop = path, dim, token, stop
        self.capacity = MIN_CAPACITY
        self.expected = 0
        self.count = 0
        self.last = 0
        self.sorted = True
        self._cols: Columns | None = None

    @property
    def cols(self) -> Columns:
        assert self._cols is not None
        return self._cols

    def start(self, rows: int, seq: int) -> None:
        self.expected = rows
        self.capacity = capacity_for(rows)

    def _create(self, mean: npt.NDArray[np.float32], mean_n: int) -> None:
        self._cols = create_columns(self.path, self.dim, self.capacity, self.token, mean,
                                    mean_n)

    def block(self, ids: I64, docs: I64, vectors: npt.NDArray[np.float32]) -> None:
        if self.stop.is_set():
            raise Stopped
        if self._cols is None:  # centred on the first block: a large sample of the whole
            self._create(vectors.mean(axis=0).astype(np.float32), max(self.expected, len(ids)))
        if self.count + len(ids) > self.capacity:
            raise VectorFileError("the database grew during its own snapshot")
        if len(ids) and (ids[0] <= self.last or np.any(np.diff(ids) <= 0)):
            self.sorted = False
        self.cols.write_rows(self.count, ids, docs, vectors.astype(np.float16))
        self.count += len(ids)
        if len(ids):
            self.last = max(self.last, int(ids.max()))

    def finish(self, seq: int, entry: tuple[int, int]) -> State:
        if self._cols is None:
            self._create(np.zeros(self.dim, np.float32), 0)
        if not self.sorted:  # written again in id order
            old = self.cols
            order = np.argsort(old.ids[:self.count], kind="stable")
            new = create_columns(self.path, self.dim, self.capacity, self.token,
                                 old.mean.copy(), old.header.mean_n,
                                 staging=staging_path(self.path, "-sorted"))
            for lo in range(0, self.count, BLOCK):
                part = order[lo:lo + BLOCK]
                new.write_rows(lo, old.ids[part], old.docs[part], old.f16[part])
            discard(old)
            self._cols = new
        state = State(1, self.count, seq, self.count, self.last, *entry)
        self.cols.write_state(state)
        return state

    def abandon(self) -> None:
        if self._cols is not None:
            self._cols.close()
        for suffix in ("-new", "-sorted"):
            staging_path(self.path, suffix).unlink(missing_ok=True)
