"""Reading an index: pooled read-only connections, its vector file beside them, and the
threads their searches share (threads.py), all closed with the index."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio

from pocketmcp.core.identity import Identity
from pocketmcp.store.api import F32, Found, Reader
from pocketmcp.store.reads import made, mean_by_doc
from pocketmcp.store.sqlite.files import beside
from pocketmcp.store.sqlite.keywords.lengths import ChunkLengths
from pocketmcp.store.sqlite.keywords.textsearch import TermCounts
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.threads import SearchThreads, Threads
from pocketmcp.store.sqlite.vectors.index import VectorIndex

T = TypeVar("T")


def recorded_identity(path: Path) -> Identity | None:
    """What the index at `path` records of its embeddings (blocking)."""
    reader = SqliteReader(path)
    try:
        return reader.identity()
    finally:
        reader.close()


class ReaderPool:
    """Read-only connections handed out one caller at a time, run in worker threads.
    `helpers`: threads lent to the connections for large chunk queries (halves.py)."""

    def __init__(self, path: Path, size: int = 4, *, helpers: Threads | None = None) -> None:
        self._path = path
        self._free: list[SqliteReader] = []
        self._slots = anyio.Semaphore(size)
        self._terms = TermCounts()  # term counts, shared by the connections
        self._lengths = ChunkLengths()  # chunk lengths for BM25, shared too
        self._helpers = helpers
        self._closed = False

    def _open(self) -> SqliteReader:
        return SqliteReader(self._path, self._terms, self._lengths, helpers=self._helpers)

    async def run(self, fn: Callable[[SqliteReader], T]) -> T:
        async with self._slots:
            reader = self._free.pop() if self._free else await anyio.to_thread.run_sync(
                self._open)
            try:
                result = await anyio.to_thread.run_sync(fn, reader)
            except BaseException:
                reader.close()
                raise
            if self._closed:
                reader.close()  # handed out before the pool closed
            else:
                self._free.append(reader)
            return result

    def prefetch_lengths(self) -> None:
        """Read the chunk lengths keyword scoring needs, in the background (bm25.py)."""
        self._lengths.prefetch(self._path)

    def close(self) -> None:
        """Close the free connections (those in use close when they come back) and stop
        the lengths' read in the background. Safe to call twice."""
        self._closed = True
        while self._free:
            self._free.pop().close()
        self._lengths.close()


class SqliteIndex:
    """One index file as searches and listings see it: read-only connections, and its
    vector file (kept in step with what is committed on each use). Owns the threads they
    use (the search threads it lends them, the vector file's warm-up, the chunk lengths'
    read): `close` stops them all."""

    def __init__(self, path: Path, dim: int, readers: int = 4, *,
                 root: Path | None = None) -> None:
        self.path = path
        self.dim = dim
        self.root = root  # the watched folder its `file:` documents are in, if any
        self.threads = SearchThreads(readers)  # no thread starts before a search needs it
        self.readers = ReaderPool(path, readers, helpers=self.threads.fts)
        self.vectors = VectorIndex(path, dim, pool=self.threads.scan)

    async def made(self, stopping: anyio.Event) -> Identity | None:
        """Wait until some writer has made the index file (store/reads.py)."""
        return await made(lambda: self.run(lambda r: r.identity()), stopping,
                          self.path.exists)

    @property
    def where(self) -> str:
        return str(self.path)

    def beside(self, name: str) -> Path:
        return beside(self.path, "." + name)

    @property
    def live(self) -> int:
        return self.vectors.live

    @property
    def vectors_from(self) -> str:
        return self.vectors.reason or "file"

    async def run(self, fn: Callable[[SqliteReader], T]) -> T:
        """`fn(reader)` on a free read-only connection, in a worker thread."""
        return await self.readers.run(fn)

    def nearest(self, reader: Reader, query: F32, k: int, candidates: int,
                allowed: Sequence[int] | None) -> Found:
        """The vector file's answer (SQLite's own scan while it is not there)."""
        assert isinstance(reader, SqliteReader)
        return self.vectors.search(reader.log, query, k, candidates, allowed)

    def mean_cosines(self, reader: Reader, query: F32, doc_ids: Sequence[int]
                     ) -> dict[int, float]:
        """From every chunk of the documents, scored as a filtered search that keeps all of
        them (from SQLite's own scan, while the vector file is not there: the nearest
        KNN_MOST of them)."""
        if not doc_ids:
            return {}
        every = 1 << 40  # no bound: all the documents' rows, each scored
        _, cosines, docs = self.nearest(reader, query, every, every, list(doc_ids))
        return mean_by_doc(cosines.tolist(), docs.tolist())

    async def open_vectors(self) -> None:
        """Map the vector file and catch up with the log (milliseconds at any size); start
        reading the chunk lengths for keyword scoring in the background."""
        await self.readers.run(lambda reader: self.vectors.sync(reader.log))
        self.readers.prefetch_lengths()

    def close(self) -> None:
        """Close the free connections and stop every thread of the index, each once the
        step or piece of work at hand is done (a search running meanwhile finishes on its
        own thread). Safe to call twice."""
        self.readers.close()
        self.vectors.close()
        self.threads.close()
