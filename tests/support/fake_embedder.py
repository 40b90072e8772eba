"""A deterministic embedder for unit tests of logic: no model loads, no thread runs it.

A text's vector is a function of its words alone (its first WINDOW words: a model reads a
window of its text too): each word, and each three-letter piece of it, is hashed to one of
`dim` columns with a sign, the counts summed and the row scaled to length 1. The same text
always gives the same vector (in every process: the hash is blake2b, not Python's salted
`hash`), texts sharing words point the same way, and related forms of a word ("bicycle",
"bicycles") share most of their pieces. It knows nothing of
meaning: a test whose assertion needs a paraphrase found keeps the real model.

Chunks are counted by the bundled model's real tokenizer, so documents split exactly as
they do under the built-in model. The identity names a provider and a model no setting can
ask for, so an index it writes is never taken for a real one.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from functools import lru_cache

import numpy as np
from tokenizers import Tokenizer

from pocketmcp.core.identity import Identity
from pocketmcp.embed.base import F32, Batching, Usage, normalised
from pocketmcp.embed.models import BUNDLED_MAX_TOKENS, bundled_tokenizer

PROVIDER = "fake"  # not a value EMBED_PROVIDER accepts
MODEL = "pocketmcp-tests/hashed-words"
DIM = 384  # the built-in model's: tests that write vectors of their own keep their shape
PIECE_WEIGHT = 0.35  # of a three-letter piece, against 1 for the whole word
WINDOW = 1024  # words read of a text (a chunk has far fewer; a hostile query far more)
_WORD = re.compile(r"\w+")


def fake_identity(dim: int = DIM) -> Identity:
    return Identity(provider=PROVIDER, model=MODEL, dim=dim)


@lru_cache(maxsize=1 << 16)
def _column(feature: str, dim: int) -> tuple[int, float]:
    """The column a feature adds to, and with which sign."""
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    number = int.from_bytes(digest, "little")
    return (number >> 1) % dim, 1.0 if number & 1 else -1.0


def features(text: str) -> dict[str, float]:
    """The weighted features of `text`: its lower-cased words, and their three-letter pieces
    (the word marked at both ends, so a piece also says where in the word it was)."""
    found: dict[str, float] = {}
    for match in itertools.islice(_WORD.finditer(text.lower()), WINDOW):
        word = match.group()
        found["w:" + word] = found.get("w:" + word, 0.0) + 1.0
        marked = f"<{word}>"
        for i in range(len(marked) - 2):
            piece = "p:" + marked[i:i + 3]
            found[piece] = found.get(piece, 0.0) + PIECE_WEIGHT
    return found


def vector_of(text: str, dim: int = DIM) -> F32:
    """The unit vector of `text` (zeros for a text without a word)."""
    row = np.zeros((1, dim), dtype=np.float32)
    for feature, weight in features(text).items():
        column, sign = _column(feature, dim)
        row[0, column] += sign * weight
    vector: F32 = normalised(row)[0]
    return vector


class FakeEmbedder:
    """An `Embedder` whose vectors are `vector_of` each text; it counts its calls like a
    provider does and never fails."""

    def __init__(self, identity: Identity | None = None, batching: Batching | None = None,
                 tokenizer: Tokenizer | None = None) -> None:
        self.identity = identity or fake_identity()
        self.model_id = self.identity.model
        self.dim = self.identity.dim
        self.tokenizer = tokenizer or bundled_tokenizer()
        self.max_tokens = BUNDLED_MAX_TOKENS
        self.batching = batching or Batching(size=1, tokens=4096)
        self.usage = Usage()
        self.where: str | None = None

    def embed(self, texts: list[str]) -> F32:
        """The vectors of `texts`, one row each (the document prefix added, if any)."""
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i] = vector_of(self.identity.doc_prefix + text, self.dim)
        return rows

    def embed_query_now(self, text: str) -> F32:
        """The vector of one query (the query prefix added, if any)."""
        return vector_of(self.identity.query_prefix + text, self.dim)

    async def embed_documents(self, texts: list[str]) -> F32:
        self._count(texts)
        return self.embed(texts)

    async def embed_query(self, text: str) -> F32:
        self._count([text])
        return self.embed_query_now(text)

    def _count(self, texts: list[str]) -> None:
        self.usage.calls += 1
        self.usage.inputs += len(texts)
        self.usage.tokens += sum(len(_WORD.findall(t)) for t in texts)

    async def load_documents(self) -> None:
        pass  # nothing to load

    async def aclose(self) -> None:
        pass  # nothing held


class FakeEmbedding:
    """The `EmbedderSource` that gives the runtime a `FakeEmbedder` (`open_runtime(...,
    embedding=FakeEmbedding(...))`): its identity whatever the index records, so an index
    made by another model is refused as it would be in production."""

    def __init__(self, batching: Batching | None = None, dim: int = DIM) -> None:
        self._batching = batching
        self._identity = fake_identity(dim)
        self.made: list[FakeEmbedder] = []  # every embedder made, for tests to look at

    async def identity(self, stored: Identity | None) -> Identity:
        return self._identity

    def make(self, identity: Identity) -> FakeEmbedder:
        embedder = FakeEmbedder(identity, self._batching)
        self.made.append(embedder)
        return embedder
