"""Records for the store tests: chunks of given texts, unit vectors, a document, all with the
small identity the store tests index under (8 dimensions, model "m")."""

from __future__ import annotations

from typing import Any

import numpy as np

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord

DIM = 8
IDENTITY = Identity(model="m", dim=DIM)


def chunks(*texts: str, section: str = "") -> tuple[Chunk, ...]:
    """One chunk per text, each starting where the one before ends."""
    out, start = [], 0
    for i, text in enumerate(texts):
        out.append(Chunk(idx=i, start=start, end=start + len(text), text=text, tokens=5,
                         sha256=sha256(text), section=section))
        start += len(text)
    return tuple(out)


def unit_vectors(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    """`n` random vectors of length 1 (float32), the same for the same seed."""
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def doc(ext: str, *texts: str, **fields: Any) -> DocRecord:
    """A raw document of the texts (its content their concatenation) under `ext`."""
    content = "".join(texts)
    return DocRecord(external_id=ext, source="raw", uri=None, title=fields.pop("title", ext),
                     content=content, sha256=sha256(content), **fields)
