"""Which rule ranks an index's documents by their words, chosen from the index's own shape.

With one match per document, a document's keyword score is either its BM25 as a whole or its
best chunk's. Which ranks better depends on the kind of collection, measured on three sets by
5-fold cross-validation (docs/search.md): whole-document BM25 on short texts of a few chunks
each (SciFact's abstracts, 3 chunks a document), the best chunk on long pages of many
sections (two documentation folders, 12 and 22 chunks a document), where whole-document
BM25 favours the longest pages (changelogs, release notes) for any word they repeat. The
index decides by its chunks per document, read again at most every RECHECK_S.
"""

from __future__ import annotations

import time
import weakref

import msgspec

from pocketmcp.search.fuse import Params
from pocketmcp.store.api import ReadIndex

RECHECK_S = 30.0  # an index's counts are read again after this long


class Shape(msgspec.Struct, frozen=True):
    """An index's documents and chunks, as its counts said when last read."""

    documents: int
    chunks: int

    @property
    def chunks_per_document(self) -> float:
        return self.chunks / self.documents if self.documents else 0.0

    def best_chunk(self, params: Params) -> bool:
        """Whether its documents rank by their best chunk for words (else as a whole)."""
        return self.chunks_per_document >= params.best_chunk_from

    def rule(self, params: Params) -> str:
        """The rule in words, for reports (check-search)."""
        which = "best chunk" if self.best_chunk(params) else "whole document"
        side = ">=" if self.best_chunk(params) else "<"
        return (f"documents ranked by their {which} for words ({self.chunks_per_document:.1f} "
                f"chunks per document {side} {params.best_chunk_from:g})")


_known: weakref.WeakKeyDictionary[ReadIndex, tuple[float, Shape]] = (
    weakref.WeakKeyDictionary())


async def shape_of(index: ReadIndex) -> Shape:
    """The index's shape, read at most every RECHECK_S (one count of its documents)."""
    now = time.monotonic()
    known = _known.get(index)
    if known is not None and now - known[0] < RECHECK_S:
        return known[1]
    counts = await index.run(lambda reader: reader.counts())
    shape = Shape(counts["documents"], counts["chunks"])
    _known[index] = (now, shape)
    return shape
