"""Indexing at a lower OS priority than searches.

Embedding documents runs on one thread of its own whose nice value is raised (Linux: the
nice value is per thread); the model's own worker threads, made from it when its session is
created, inherit it. A search's query session runs on the normal threads, so a search that
comes while indexing runs gets the CPU first. Conversion and OCR workers are lowered alike
(convert/pool.py). Elsewhere priorities are left alone (there the value is per process).

One rule: all indexing work runs at one level, NICE above the server process's own nice
value (set, not added: a thread or worker lowered twice stays at that level).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio

T = TypeVar("T")

NICE = 10  # indexing threads and conversion/OCR workers: this far below the server


def level() -> int:
    """The nice value indexing work runs at: NICE above the server process's (its main
    thread's) own value, at most 19."""
    return min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + NICE)


def lower(tid: int | None = None) -> bool:
    """Set the nice value of thread (or process) `tid` (the calling thread by default) to
    level(), never raising its priority; False where it is not done (not Linux, or not
    allowed)."""
    if not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id() if tid is None else tid
    try:
        os.setpriority(os.PRIO_PROCESS, tid, max(level(), os.getpriority(os.PRIO_PROCESS, tid)))
    except OSError:
        return False
    return True


class Lowered:
    """One worker thread at a lower priority, made on first use."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._made = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        with self._made:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="pocketmcp-index",
                                                initializer=lower)
            future = self._pool.submit(fn, *args)
        return await anyio.to_thread.run_sync(future.result)

    def close(self) -> None:
        with self._made:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
