"""The worker threads of one index's searches, owned and closed by the index that made them.

Two kinds (SearchThreads): two threads that share the vector stage's passes in pieces
(vectors/scan.py), and helpers that run the second half of a large chunk query
(halves.py). Neither starts a thread until its first piece of work; `close` lets the work
already given finish, then stops them; work given after that runs in the calling thread
(the same results, on one core).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class Threads:
    """A few worker threads named `name`_0, `name`_1, ... Thread-safe."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def _started(self) -> ThreadPoolExecutor | None:
        """The executor, made now if need be; None once closed (call under the lock)."""
        if self._closed:
            return None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.size, thread_name_prefix=self.name)
        return self._executor

    def map(self, fn: Callable[[int, int], T], spans: Sequence[tuple[int, int]]) -> list[T]:
        """`fn(start, end)` of each span, in order, shared by the threads (each takes the
        next span when it is done with one)."""
        with self._lock:
            executor = self._started()
            futures = None if executor is None else [executor.submit(fn, *s) for s in spans]
        if futures is None:
            return [fn(*s) for s in spans]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:  # after a failure, the spans not started yet are not
                f.cancel()
            raise

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T] | None:
        """`fn(*args)` in one of the threads; None once closed (the caller does the work
        itself)."""
        with self._lock:
            executor = self._started()
            return None if executor is None else executor.submit(fn, *args)

    def close(self) -> None:
        """Let the work given finish, then stop the threads. Safe to call twice."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


class SearchThreads:
    """The thread pools one SqliteIndex lends its vector index and its readers."""

    def __init__(self, readers: int) -> None:
        self.scan = Threads(2, "pocketmcp.scan")
        self.fts = Threads(readers, "pocketmcp.fts")  # one per pooled reader at most

    def close(self) -> None:
        self.scan.close()
        self.fts.close()
