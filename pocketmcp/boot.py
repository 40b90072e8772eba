"""Boot: the services of one index built in order and handed over complete.

The identity of the embeddings comes first (the settings, completed by what the index records),
then the model loads while the main index opens (its writer lock taken when the plan asks, its
vector file mapped), then the hosts of the main index and the named databases are made, and the
model's background is learnt for searches. Nothing is filled in later: what `services` returns
is all there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import anyio

from pocketmcp import logs
from pocketmcp.convert.pool import Converter
from pocketmcp.core.chunking import Chunker
from pocketmcp.core.identity import Identity
from pocketmcp.embed.background import model_background
from pocketmcp.embed.base import Embedder, EmbedderSource
from pocketmcp.errors import ModelMismatchError, OtherFolder, ProviderError, WriterBusyError
from pocketmcp.hosts import Hosts, IndexHost, open_writer
from pocketmcp.pipeline.precedence import Precedence
from pocketmcp.pipeline.settings import PipelineSettings
from pocketmcp.pipeline.supervisor import Pipeline
from pocketmcp.pipeline.writer import EventHook, WriterActor
from pocketmcp.plans import Plan
from pocketmcp.readiness import Readiness
from pocketmcp.store.api import Place, ReadIndex
from pocketmcp.store.registry import Registry

log = logs.get("pocketmcp.runtime")


@dataclass(frozen=True)
class Services:
    """What boot makes, complete: the embeddings' identity, the embedder, the chunker, and
    the hosts of the main index and the named databases."""

    identity: Identity
    embedder: Embedder
    chunker: Chunker
    hosts: Hosts

    @property
    def main(self) -> IndexHost:
        return self.hosts.main


@dataclass(frozen=True)
class Boot:
    """What boot is given: the plan, where the main index is, where the embedder comes from,
    the parts it reports to and shares, and the few settings it reads."""

    plan: Plan
    place: Place
    embedding: EmbedderSource
    readiness: Readiness
    converter: Converter
    pipeline_settings: PipelineSettings
    on_event: EventHook | None
    chunk_size: int  # tokens a chunk has at most, and shares with the one before it
    chunk_overlap: int
    write_batch_files: int  # files a writer commits in one transaction at most
    precedence: Precedence  # the searches the main index's feed gives way to

    async def services(self) -> Services:
        """Build the services in order: the identity, then the model and the main index (at
        once), then the hosts; ready when they are all there."""
        self.readiness.status.phase = "loading_model"
        identity = await self._identity()
        # Where `file:` documents are: the folder this process feeds the index from, else
        # the one the index records (a search from anywhere, a server without WATCH_DIR),
        # else the one given; none known (an imported index searched from elsewhere): no
        # file is compared, rather than every one marked changed against WATCH_DIR's default.
        recorded = await anyio.to_thread.run_sync(self.place.folder)
        settings = self.pipeline_settings.watched
        watched = settings.root.absolute()
        feeding = (self.plan.feed != "none" and self.plan.writer != "never"
                   and watched.is_dir())
        if feeding and not self.plan.rebuild and recorded is not None and (
                recorded.other_than(watched.resolve())):
            raise OtherFolder(
                f"{self.place.describe()} is the index of {recorded.path}; {watched} is "
                "another folder of this machine, and indexing it here would remove that "
                "folder's documents from the index. Give it an index of its own (leave out "
                "--db and SQLITE_PATH: each folder gets its own; or another PG_SCHEMA), or "
                "run with --rebuild to make this index that folder's alone")
        root = watched if feeding else recorded.root if recorded is not None else (
            watched if settings.given else None)
        main_index = self.place.reader(identity.dim, root=root)
        loaded: list[tuple[Embedder, Chunker]] = []
        opened: list[WriterActor] = []  # filled in its thread: a cancelled wait loses nothing
        try:
            async with anyio.create_task_group() as boot:  # the model loads meanwhile
                boot.start_soon(self._load_model, identity, loaded, name="pocketmcp.model")
                await self._open_index(identity, main_index, opened)
                self.readiness.searchable(main_index, identity)  # by keywords, meanwhile
        except BaseException:
            for writer in opened:
                writer.close()  # its lock goes with the failed start
            main_index.close()
            with anyio.CancelScope(shield=True):
                for embedder, _ in loaded:
                    await embedder.aclose()
            raise
        if not opened and recorded is not None:  # another process writes: its folder
            main_index.root = recorded.root
        (embedder, chunker), = loaded
        services = Services(identity, embedder, chunker, Hosts(
            self._host(None, self.place, main_index, identity, embedder, chunker),
            Registry(self.place),
            host_for=lambda name, place: self._host(name, place, place.reader(identity.dim),
                                                    identity, embedder, chunker)))
        if self.plan.search and not self.readiness.stopping.is_set():
            try:  # the query session loads on first use; the probes then teach it the
                # model's background, which every search reads its cosines against
                await model_background(embedder)
            except ProviderError as exc:  # searches answer by keywords until it is back
                log.warning("provider_unavailable", error=str(exc))
        if opened:
            services.main.adopt(opened[0])  # before `ready`: writes can queue
        return services

    async def _identity(self) -> Identity:
        """What the main index is (to be) built with: the settings, completed by what the
        index records (nothing when it is rebuilt)."""
        stored = None
        if not self.plan.rebuild:
            stored = await anyio.to_thread.run_sync(self.place.identity)
        return await self.embedding.identity(stored)

    async def _load_model(self, identity: Identity,
                          loaded: list[tuple[Embedder, Chunker]]) -> None:
        started = time.perf_counter()
        embedder = await anyio.to_thread.run_sync(self.embedding.make, identity)
        loaded.append((embedder, Chunker(
            embedder.tokenizer, size=self.chunk_size, overlap=self.chunk_overlap,
            max_tokens=embedder.max_tokens)))
        self.readiness.status.model_ready = True
        self.readiness.status.model_load_s = round(time.perf_counter() - started, 3)

    async def _open_index(self, identity: Identity, index: ReadIndex,
                          opened: list[WriterActor]) -> None:
        """Take the writer lock if the plan asks, and map the vector file: milliseconds."""
        started = time.perf_counter()
        if self.plan.writer != "never":
            try:
                await anyio.to_thread.run_sync(lambda: opened.append(self._open_main_writer(
                    identity)))
            except WriterBusyError:
                if self.plan.writer == "must":
                    raise
                log.info("read_only", index=self.place.describe(),
                         reason="another process holds the writer lock")
        self.readiness.status.role = "writer" if opened else "reader"
        if not opened:
            stored = await index.made(self.readiness.stopping)  # until a writer made it
            if stored is not None and stored != identity:
                raise ModelMismatchError(index.where, stored.describe(),
                                         stored.differences(identity))
        if self.plan.search and not self.readiness.stopping.is_set():
            await index.open_vectors()
        self.readiness.status.index_open_s = round(time.perf_counter() - started, 3)

    def _open_main_writer(self, identity: Identity) -> WriterActor:
        return open_writer(self.place, identity, rebuild=self.plan.rebuild,
                           queue_size=self.pipeline_settings.queue_size,
                           batch_files=self.write_batch_files, on_event=self.on_event)

    def _host(self, name: str | None, place: Place, index: ReadIndex, identity: Identity,
              embedder: Embedder, chunker: Chunker) -> IndexHost:
        """The host of an index: the main one is fed as the plan says, a named database by
        tool requests alone."""

        def pipeline_for(writer: WriterActor) -> Pipeline:
            feed = self.plan.feed if name is None else "none"
            watch_dir = self.pipeline_settings.watched.root
            if feed != "none" and not watch_dir.is_dir():
                # Without the folder to feed it, it still takes tool requests.
                self.readiness.status.last_error = (f"WATCH_DIR={watch_dir} is not a "
                                          "folder; nothing is watched")
                log.error("not_watching", error=self.readiness.status.last_error)
                feed = "none"
            if feed == "none":
                return Pipeline(self.pipeline_settings, writer=writer, feed="none")
            return Pipeline(
                self.pipeline_settings, writer=writer, feed=feed, embed=embedder.embed_documents,
                load=embedder.load_documents, dim=identity.dim, chunker=chunker,
                converter=self.converter, force=self.plan.force, accept_requests=self.plan.requests,
                batching=embedder.batching,
                # Watching, a failing provider is waited for; one scan ends with its error.
                wait_for_provider=feed == "follow", keywords_first=self.plan.keywords_first,
                precedence=self.precedence)

        return IndexHost(name, place, index, identity=identity,
                         queue_size=self.pipeline_settings.queue_size,
                         batch_files=self.write_batch_files, on_event=self.on_event,
                         pipeline_for=pipeline_for, on_demand=name is not None)
