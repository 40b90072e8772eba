"""Searches go before indexing, in one process.

The runtime owns one `Precedence` and hands it to the search path and to the stages of its
indexing pipeline. A search marks itself in flight for as long as it runs (`searching`). The
stages (reading a file, cutting a group of files, a transaction, a batch of vectors) look
between one step and the next (`give_way`): while a search is in flight they wait for the
last one to end, at most GIVE_WAY_S a step, so that the search has the event loop, the
interpreter's lock and the cores to itself, and indexing still moves when a client searches
without pause. With no search in flight nothing waits: a first scan runs flat out.

A lower OS priority (embed/priority.py) cannot do this for the work that holds the
interpreter's lock or shares the event loop with the search (reading, chunking, writing).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

GIVE_WAY_S = 0.5  # the longest a step of indexing waits for searches in flight


class Precedence:
    """How many searches are in flight, an event set when none is, and the time indexing
    spent giving way to them. Searches and stages share one event loop."""

    def __init__(self) -> None:
        self._active = 0
        self._idle: anyio.Event | None = None  # set when the last search in flight ends
        self.waits = 0  # steps of indexing that waited
        self.waited_s = 0.0  # how long they waited, in all

    @property
    def active(self) -> int:
        """Searches in flight now."""
        return self._active

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Around one search, from its arrival to its answer."""
        if not self._active:
            self._idle = anyio.Event()
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            if not self._active and self._idle is not None:
                self._idle.set()

    async def give_way(self, most_s: float = GIVE_WAY_S) -> float:
        """Between two steps of indexing: while a search is in flight, wait for it to end,
        `most_s` at most; the seconds waited (0 at once when none is)."""
        if not self._active or self._idle is None:
            return 0.0
        started = time.monotonic()
        with anyio.move_on_after(most_s):
            await self._idle.wait()
        waited = time.monotonic() - started
        self.waits += 1
        self.waited_s += waited
        return waited
