"""The long-lived parts one process needs: model, chunker, writer, readers."""

from __future__ import annotations

from pathlib import Path

import anyio

from pocketmcp.config import Config
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

    @classmethod
    async def load(cls, config: Config) -> Engine:
        spec = await anyio.to_thread.run_sync(ModelSpec, config)
        embedder = await anyio.to_thread.run_sync(Embedder, spec)
        chunker = Chunker(embedder.tokenizer, size=config.chunk_size,
                          overlap=config.chunk_overlap, max_tokens=embedder.max_tokens)
        return cls(config, spec, embedder, chunker)

    def open_writer(self, *, rebuild: bool = False, db_path: Path | None = None) -> IndexWriter:
        return IndexWriter(db_path or self.config.sqlite_path, model_id=self.spec.model_id,
                           dim=self.spec.dim, rebuild=rebuild)
