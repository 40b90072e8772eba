"""The one interface every embedding provider offers to the pipeline and the search.

Documents and queries are embedded by separate methods, because most retrieval models want
different prefixes for each (embed/prefixes.py); the provider adds them. Both are async: a
provider runs its blocking or remote work off the event loop and bounds its own concurrency.
"""

from __future__ import annotations

import time
from typing import Protocol

import msgspec
import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from pocketmcp.core.identity import Identity

F32 = npt.NDArray[np.float32]


class Batching(msgspec.Struct, frozen=True):
    """How many chunks a caller should hand over in one embed_documents call."""

    size: int  # chunks
    tokens: int  # tokens of those chunks: the longest times the count when `padded`, else summed
    padded: bool = True


class Usage(msgspec.Struct, kw_only=True):
    """What a provider has done since it was made (mutated on the event loop only)."""

    calls: int = 0  # model calls, or HTTP requests answered
    inputs: int = 0  # texts embedded
    tokens: int = 0  # tokens sent, as the provider counted them when it says
    retries: int = 0  # requests sent again after a failure
    failures: int = 0  # calls that failed after their retries
    seconds: float = 0.0  # time spent in the model or waiting for the provider
    last_error: str | None = None
    retry_at: float | None = None  # time.time() before which calls fail at once (provider down)

    def answered(self, texts: int, started: float) -> None:
        """One call answered: its `texts`, and the time since `started` (perf_counter)."""
        self.calls += 1
        self.inputs += texts
        self.seconds += time.perf_counter() - started

    def retry_in(self) -> float | None:
        """Seconds until the provider is tried again, while it is taken to be down."""
        if self.retry_at is None:
            return None
        left = self.retry_at - time.time()
        return left if left > 0 else None


class Embedder(Protocol):
    identity: Identity  # what the index records: provider, model, dimensions, prefixes
    model_id: str
    dim: int
    max_tokens: int  # the most tokens a chunk may have, counted with `tokenizer`
    tokenizer: Tokenizer  # counts tokens as the model does (or close to it), for chunking
    batching: Batching
    usage: Usage
    where: str | None  # the provider's endpoint as reported (None: in this process)

    async def embed_documents(self, texts: list[str]) -> F32:
        """Unit vectors of `texts`, one row each, in order (the document prefix is added)."""
        ...

    async def embed_query(self, text: str) -> F32:
        """The unit vector of one search query (the query prefix is added)."""
        ...

    async def load_documents(self) -> None:
        """Load what embedding documents needs, if it is not loaded yet (the first batch
        would load it; a search never needs it)."""
        ...

    async def aclose(self) -> None:
        """Release connections (nothing for an in-process model)."""
        ...


class EmbedderSource(Protocol):
    """Where the runtime gets its embedder: the identity first (checked against the index
    before anything loads), then the embedder itself. The settings' provider in production;
    a deterministic one in unit tests of logic."""

    async def identity(self, stored: Identity | None) -> Identity:
        """What to embed with, given what the index records (None: a new index)."""
        ...

    def make(self, identity: Identity) -> Embedder:
        """The embedder for `identity` (blocking: a local model loads here)."""
        ...


def normalised(matrix: F32) -> F32:
    """Rows scaled to length 1 (rows of zeros stay zeros)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: F32 = np.ascontiguousarray(matrix / norms, dtype=np.float32)
    return out
