"""A test's index driven by the pipeline directly: one scan (`Index.index_once`) or a live
watch (`Watching`), with the real writer, and the embedder the test chose."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import numpy as np

from pocketmcp.config import Config
from pocketmcp.convert.pool import Converter
from pocketmcp.core.chunking import Chunker
from pocketmcp.embed.base import F32, Batching, Embedder
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import WriterActor
from pocketmcp.store.sqlite.writes import SqliteWriter


class QueryNow(Embedder, Protocol):
    """An embedder that also embeds a query at once (the real model and the fake do)."""

    def embed_query_now(self, text: str) -> F32: ...


# Two short notes on unrelated topics, as the pipeline tests write them.
A = """# Sourdough baking

Sourdough bread rises with a wild yeast starter. Feed the starter with flour and
water every day, and bake when it has doubled in size.
"""
B = """# Kubernetes networking

Pods talk to each other over a flat network. A Service gives a set of pods a stable
virtual IP address and a DNS name.
"""


class Index:
    """A test's index: the real writer, with helpers to run the pipeline."""

    def __init__(self, config: Config, embedder: QueryNow, chunker: Chunker) -> None:
        self.config = config
        self.embedder = embedder
        self.chunker = chunker
        self.embedded: list[str] = []
        self.events: list[dict[str, Any]] = []

    @property
    def kb(self) -> Path:
        return self.config.watched.root

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return await self.embedder.embed_documents(texts)

    def writer(self) -> SqliteWriter:
        return SqliteWriter(self.config.store.sqlite_path, self.embedder.identity)

    def pipeline(self, writer: SqliteWriter, *, follow: bool, **kw: Any) -> Pipeline:
        kw.setdefault("converter", Converter(self.config.convert.kept_in(
            self.config.main_place().beside("ocr"))))
        kw.setdefault("batching", Batching(size=self.config.embed.batch_size,
                                           tokens=self.config.embed.batch_tokens))
        actor = WriterActor(writer, queue_size=self.config.pipeline.queue_size,
                            batch_files=self.config.pipeline.write_batch_files,
                            on_event=lambda event: self.on_event(event))
        return Pipeline(self.config.pipeline, writer=actor,
                        feed="follow" if follow else "scan",
                        embed=self.embed, dim=self.embedder.dim, chunker=self.chunker,
                        accept_requests=follow, **kw)

    def on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    async def index_once(self, **kw: Any) -> Pipeline:
        """One scan of the folder, like `pocketmcp index`."""
        self.embedded.clear()
        self.events.clear()
        writer = self.writer()
        try:
            pipeline = self.pipeline(writer, follow=False, **kw)
            with anyio.fail_after(120):
                await pipeline.run()
        finally:
            writer.close()
            assert pipeline.converter is not None
            await pipeline.converter.aclose()
        return pipeline

    def text_of(self, rel: str) -> str:
        """The chunk texts stored for a file, joined."""
        from pocketmcp.store.sqlite.connect import open_sync_reader

        conn = open_sync_reader(self.config.store.sqlite_path)
        try:
            rows = conn.execute(
                "SELECT substr(d.content, c.start_off + 1, c.end_off - c.start_off) FROM chunks c "
                "JOIN documents d ON d.doc_id = c.doc_id WHERE d.external_id = ? ORDER BY c.idx",
                ("file:" + rel,)).fetchall()
        finally:
            conn.close()
        return "\n".join(r[0] for r in rows)

    def documents(self) -> list[str]:
        """The external ids the index holds."""
        from pocketmcp.store.sqlite.connect import open_sync_reader

        conn = open_sync_reader(self.config.store.sqlite_path)
        try:
            return [r[0] for r in conn.execute("SELECT external_id FROM documents")]
        finally:
            conn.close()

    def search(self, query: str, k: int = 5) -> list[str]:
        from pocketmcp.store.sqlite.queries import SqliteReader

        reader = SqliteReader(self.config.store.sqlite_path)
        try:
            vector = self.embedder.embed_query_now(query)
            hits = reader.search_vector(vector.tobytes(), k)
        finally:
            reader.close()
        paths: list[str] = []
        for hit in hits:
            path = hit.external_id.removeprefix("file:")
            if path not in paths:
                paths.append(path)
        return paths


class Watching:
    """A live pipeline in a task group; tests wait on its events, never on the clock."""

    def __init__(self, index: Index, pipeline: Pipeline, writer: SqliteWriter) -> None:
        self.index = index
        self.writer = writer
        self.pipeline = pipeline
        self._returned: set[int] = set()
        self._changed = anyio.Event()
        self.done = anyio.Event()

    async def run(self) -> None:
        try:
            await self.pipeline.run()
        finally:
            self.done.set()

    def on_event(self, event: dict[str, Any]) -> None:
        self.index.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event not returned before that matches, waiting for it if need be."""
        with anyio.fail_after(20):
            while True:
                for i, event in enumerate(self.index.events):
                    if i not in self._returned and predicate(event):
                        self._returned.add(i)
                        return event
                await self._changed.wait()
