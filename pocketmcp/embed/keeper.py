"""The built-in model only when needed: its state, and the thread that unloads it when idle.

A server keeps the model's sessions (a few hundred MiB) for as long as searches or indexing
use them. After MODEL_IDLE_UNLOAD_S without either, `IdleUnloader` asks the embedder to drop
them (`unload`), and the freed memory is handed back to the system. The next search loads
the query session again in the background and is answered with keyword results meanwhile
(`ModelLoading`); the next batch of documents loads the documents' session and waits for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import threading
import time
from collections.abc import Callable
from typing import Literal

from tokenizers import Tokenizer

from pocketmcp.core.identity import Identity
from pocketmcp.embed.base import F32, Batching, Usage
from pocketmcp.errors import ModelLoading

State = Literal["loaded", "unloaded", "loading"]

CHECK_S = 5.0  # how often the idle time is looked at, at most


class ModelState:
    """Whether the model is in memory, and how long since it was last used (thread-safe)."""

    def __init__(self) -> None:
        self.state: State = "loaded"
        self.busy = 0  # calls using the model right now
        self.last_used = time.monotonic()
        self.unloads = 0
        self.loads = 0  # loads after an unload
        self.load_s: float | None = None  # how long the last of them took
        self.lock = threading.Lock()

    def begin(self) -> None:
        with self.lock:
            self.busy += 1
            self.last_used = time.monotonic()

    def end(self) -> None:
        with self.lock:
            self.busy -= 1
            self.last_used = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the model was last used; 0 while it is in use."""
        with self.lock:
            return 0.0 if self.busy else time.monotonic() - self.last_used


class IdleUnloader:
    """A daemon thread calling `unload` once the model has been idle for `idle_s` seconds;
    `unload` returns False when it could not (the model was taken meanwhile)."""

    def __init__(self, state: ModelState, idle_s: float, unload: Callable[[], bool]) -> None:
        self._state = state
        self._idle_s = idle_s
        self._unload = unload
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pocketmcp-model-idle",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        every = min(CHECK_S, max(self._idle_s / 4, 0.05))
        while not self._stop.wait(every):
            if self._state.state == "loaded" and self._state.idle_for() >= self._idle_s:
                self._unload()

    def stop(self) -> None:
        self._stop.set()


def give_back_memory() -> None:
    """Collect what was dropped and return the freed heap to the system (glibc keeps it
    otherwise: an unloaded model would free nothing the system sees)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    if os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    return trim


def rss_mib() -> float | None:
    """This process's resident memory in MiB (Linux; None elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


class StillLoading:
    """The embedder searches get while the model is still loading at start: every query
    raises ModelLoading, so that they answer by keywords (with a notice) meanwhile."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.model_id = identity.model
        self.dim = identity.dim
        self.max_tokens = 0
        self.batching = Batching(size=1, tokens=1)
        self.usage = Usage()
        self.where: str | None = None

    @property
    def tokenizer(self) -> Tokenizer:  # nothing chunks with it: searches only
        raise ModelLoading(LOADING)

    @tokenizer.setter
    def tokenizer(self, value: Tokenizer) -> None:
        raise AttributeError("read-only")

    async def embed_documents(self, texts: list[str]) -> F32:
        raise ModelLoading(LOADING)

    async def embed_query(self, text: str) -> F32:
        raise ModelLoading(LOADING)

    async def load_documents(self) -> None:
        raise ModelLoading(LOADING)

    async def aclose(self) -> None:
        pass


LOADING = "the model is still loading, as the server is starting; it is ready in a moment"
