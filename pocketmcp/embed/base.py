"""The one interface every embedding provider offers to the pipeline and the search.

Documents and queries are embedded by separate methods, because some models want different
prefixes (or sessions) for each. Both are async: a provider runs its blocking or remote work
off the event loop and bounds its own concurrency.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

F32 = npt.NDArray[np.float32]


class Embedder(Protocol):
    model_id: str
    dim: int
    max_tokens: int  # the model's window: chunks are cut to fit it
    tokenizer: Tokenizer  # counts tokens as the model does, for chunking

    async def embed_documents(self, texts: list[str]) -> F32:
        """Unit vectors of `texts`, one row each, in order."""
        ...

    async def embed_query(self, text: str) -> F32:
        """The unit vector of one search query."""
        ...


def normalised(matrix: F32) -> F32:
    """Rows scaled to length 1 (rows of zeros stay zeros)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: F32 = np.ascontiguousarray(matrix / norms, dtype=np.float32)
    return out
