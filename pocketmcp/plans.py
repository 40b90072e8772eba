"""What an entry point asks of the runtime (a Plan), what the runtime hands to ops (Reading,
Writing, or an opener of one) and what it reports (Status). Ops import these, never the
runtime itself.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import msgspec

from pocketmcp.embed.base import Embedder
from pocketmcp.errors import NotReady
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.prepare import Preparer
from pocketmcp.pipeline.supervisor import Feed
from pocketmcp.pipeline.writer import WriterInbox
from pocketmcp.store.api import ReadIndex

T = TypeVar("T")
Open = Callable[[], Awaitable[T]]  # what an op calls once its arguments are found good



class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """What an entry point needs from the runtime."""

    writer: Literal["never", "try", "must"] = "try"  # the main index's writer lock
    feed: Feed = "none"  # the watched folder: not at all, one scan, or followed
    requests: bool = True  # tools may write
    search: bool = True  # the vector file mapped and the query session warm before `ready`
    rebuild: bool = False  # empty the main index first
    force: bool = False  # re-read and re-embed every file
    keywords_first: bool = False  # one scan returns once keyword-searchable, vectors later
    keep_serving: bool = False  # a failure is recorded and reads go on, instead of raising


def serving(watch: bool) -> Plan:
    return Plan(feed="follow" if watch else "none", keep_serving=True)


INDEXING = Plan(writer="must", feed="scan", requests=False, search=False)
WATCHING = Plan(writer="must", feed="follow", requests=False, search=False)
READING = Plan(writer="never")


class Status(msgspec.Struct, kw_only=True):
    phase: Literal["starting", "loading_model", "indexing", "ready", "failed"] = "starting"
    role: Literal["pending", "writer", "reader"] = "pending"
    model_ready: bool = False
    initial_indexing_done: bool = False
    last_error: str | None = None
    started_at: float = msgspec.field(default_factory=time.time)
    index_open_s: float | None = None  # the writer lock taken and the vector file mapped
    model_load_s: float | None = None


@dataclass(frozen=True)
class Reading:
    """What a search needs: the index as readers see it, the model for queries, whether
    the first scan of the watched folder is complete, and the searches in flight (which
    indexing gives way to)."""

    index: ReadIndex
    embedder: Embedder
    complete: bool
    precedence: Precedence
    deadline_s: float | None = None  # SEARCH_TIMEOUT_S: a search's time limit

    def require_complete(self) -> None:
        """NOT_READY when the first scan has not finished: an empty answer would mislead."""
        if not self.complete:
            raise NotReady("index still loading: the first scan of the folder has not "
                           "finished and nothing matches yet; try again in a few seconds")


@dataclass(frozen=True)
class Writing:
    """What a write needs: the index (to reuse vectors), the way to its writer, and the
    chunker and model to prepare documents with."""

    index: ReadIndex
    writes: WriterInbox
    prepare: Preparer
