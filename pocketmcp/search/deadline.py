"""A search's deadline (SEARCH_TIMEOUT_S): past it, the search answers DEADLINE_EXCEEDED and
the work it left in worker threads stops at its next `check()`.

The deadline travels in a context variable, which anyio hands to every worker thread a task
starts, so a loop deep inside a store's reader checks it without being passed anything."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

from pocketmcp.errors import DeadlineExceeded

_DEADLINE: ContextVar[float | None] = ContextVar("pocketmcp_deadline", default=None)


def _exceeded(seconds: float) -> DeadlineExceeded:
    return DeadlineExceeded(f"the search ran longer than SEARCH_TIMEOUT_S ({seconds:g} s) and "
                            "was stopped: narrow it (a shorter path_glob, fewer filters, a "
                            "smaller top_k) or raise SEARCH_TIMEOUT_S")


def check() -> None:
    """DEADLINE_EXCEEDED when the current search is past its deadline (any thread)."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded("the search ran longer than SEARCH_TIMEOUT_S and was stopped")


def remaining() -> float | None:
    """Seconds left before the current search's deadline (None: it has none)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


@asynccontextmanager
async def within(seconds: float | None) -> AsyncIterator[None]:
    """The block, stopped with DEADLINE_EXCEEDED after `seconds` (None: no limit)."""
    if seconds is None:
        yield
        return
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        with anyio.fail_after(seconds):
            yield
    except (TimeoutError, DeadlineExceeded):
        raise _exceeded(seconds) from None
    finally:
        _DEADLINE.reset(token)
