"""The long-lived parts one process needs: model, chunker, writer, readers."""

from __future__ import annotations

from pathlib import Path

import anyio

from pocketmcp.config import Config
from pocketmcp.convert import Converter, Limits
from pocketmcp.core.chunking import Chunker
from pocketmcp.model import Embedder, ModelSpec
from pocketmcp.store.writes import IndexWriter


class Engine:
    """Loads the model in a worker thread and opens the index for writing."""

    def __init__(self, config: Config, spec: ModelSpec, embedder: Embedder,
                 chunker: Chunker) -> None:
        self.config = config
        self.spec = spec
        self.embedder = embedder
        self.chunker = chunker
        self.model_limiter = anyio.CapacityLimiter(1)
        self.converter = Converter(Limits.of(config))

    @classmethod
    async def load(cls, config: Config, spec: ModelSpec | None = None) -> Engine:
        if spec is None:
            spec = await anyio.to_thread.run_sync(ModelSpec, config)
        embedder = await anyio.to_thread.run_sync(Embedder, spec)
        chunker = Chunker(embedder.tokenizer, size=config.chunk_size,
                          overlap=config.chunk_overlap, max_tokens=embedder.max_tokens)
        return cls(config, spec, embedder, chunker)


def open_writer(config: Config, spec: ModelSpec, *, rebuild: bool = False,
                db_path: Path | None = None) -> IndexWriter:
    """The index's writer; checks the model before anything slow is loaded."""
    return IndexWriter(db_path or config.sqlite_path, model_id=spec.model_id, dim=spec.dim,
                       rebuild=rebuild)
