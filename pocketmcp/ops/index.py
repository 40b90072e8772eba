"""The index as a whole: rescanning the watched folder, and its status."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sized
from typing import Protocol

import anyio

from pocketmcp import __version__
from pocketmcp.core.safe import safe_text
from pocketmcp.embed.base import Embedder
from pocketmcp.embed.models import canonical_id
from pocketmcp.embed.settings import DEFAULT_MODEL_ID
from pocketmcp.errors import Busy, PocketError
from pocketmcp.ops.results import ReindexResult
from pocketmcp.ops.status_results import (
    EmbeddingStatus,
    HealthResult,
    IndexProgress,
    ServingStatus,
    SkippedFile,
    StatusResult,
)
from pocketmcp.pipeline.state import Stats
from pocketmcp.pipeline.watcher import Only
from pocketmcp.plans import Status
from pocketmcp.search.filters import compile_glob
from pocketmcp.store.api import ReadIndex

Progress = Callable[[int, int | None, str], Awaitable[None]]
PROGRESS_EVERY_S = 0.25


class Rescanner(Protocol):
    """The running feed of the watched folder, as the runtime lends it."""

    @property
    def stats(self) -> Stats: ...
    @property
    def inflight(self) -> Sized: ...

    async def rescan(self, *, force: bool = False, only: Only | None = None) -> Stats: ...
    def queue_depths(self) -> dict[str, dict[str, int]]: ...


async def reindex(pipeline: Rescanner, index: ReadIndex, *, force: bool, path_glob: str | None,
                  progress: Progress | None = None) -> ReindexResult:
    """Scan the watched folder again inside the running pipeline; `progress(done, total,
    message)` is called every PROGRESS_EVERY_S while it runs."""
    only = compile_glob(path_glob).match if path_glob else None
    started = time.perf_counter()
    stats = pipeline.stats
    before, seen_before = stats.processed + stats.removed, stats.seen
    result: dict[str, Stats | PocketError] = {}
    finished = anyio.Event()

    async def run() -> None:
        try:
            result["stats"] = await pipeline.rescan(force=force, only=only)
        except PocketError as exc:
            result["error"] = exc
        finally:
            finished.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, name="pocketmcp.reindex")
        while not finished.is_set():
            if progress is not None:
                done = stats.processed + stats.removed - before
                total = max(stats.seen - seen_before, done)
                await progress(done, total or None, f"{done} of {total} files checked")
            with anyio.move_on_after(PROGRESS_EVERY_S):
                await finished.wait()
    error = result.get("error")
    if isinstance(error, Busy):
        raise Busy("a reindex is already running; wait for it to finish")
    if isinstance(error, PocketError):
        raise error
    s = result["stats"]
    assert isinstance(s, Stats)
    counts = await index.run(lambda r: r.counts())
    n = s.counts()  # as `index` and the log give them
    return ReindexResult(
        files_added=n["added"], files_updated=n["updated"], files_removed=n["removed"],
        files_unchanged=n["unchanged"], files_skipped=n["skipped"],
        chunks_embedded=s.chunks_embedded, chunks_total=counts["chunks"],
        chunks_waiting=counts["waiting"],
        elapsed_ms=round((time.perf_counter() - started) * 1000),
    )


def embedding_status(embedder: Embedder) -> EmbeddingStatus:
    identity, usage = embedder.identity, embedder.usage
    retry_in = usage.retry_in()
    return EmbeddingStatus(
        provider=identity.provider, model=identity.model, dimensions=identity.dim,
        doc_prefix=identity.doc_prefix, query_prefix=identity.query_prefix,
        url=embedder.where, available=retry_in is None,
        retry_in_s=None if retry_in is None else round(retry_in, 1), calls=usage.calls,
        inputs=usage.inputs, tokens=usage.tokens, retries=usage.retries,
        failures=usage.failures, seconds=round(usage.seconds, 3),
        last_error=safe_text(usage.last_error) if usage.last_error else None)


def model_named(provider: str, model: str | None) -> str:
    """The model the settings name (EMBED_MODEL), before it is loaded."""
    return canonical_id(model or DEFAULT_MODEL_ID) if provider == "local" else (
        model or DEFAULT_MODEL_ID)


async def status(state: Status, *, model: str, embedder: Embedder | None, index_path: str,
                 watch_dir: str | None, pipeline: Rescanner | None,
                 index: ReadIndex | None, ocr: str | None = None,
                 serving: ServingStatus | None = None) -> StatusResult:
    """What this process serves and how far indexing is; counts once the index is open."""
    counts = await index.run(lambda r: r.counts()) if index is not None else None
    return StatusResult(
        phase=state.phase, role=state.role, model=model, model_ready=state.model_ready,
        dimensions=embedder.dim if embedder is not None else None,
        index_path=index_path, watch_dir=watch_dir,
        documents=counts["documents"] if counts else None,
        chunks=counts["chunks"] if counts else None,
        initial_indexing_done=state.initial_indexing_done,
        queue_depths=pipeline.queue_depths() if pipeline else {},
        files_indexed_since_start=(pipeline.stats.added + pipeline.stats.updated
                                   if pipeline else 0),
        last_error=safe_text(state.last_error) if state.last_error else None,
        embedding=embedding_status(embedder) if embedder is not None else None,
        chunks_waiting=counts["waiting"] if counts else None,
        vectors_eta_s=vectors_eta(counts["waiting"] if counts else 0, pipeline),
        ocr=ocr, sharing=serving, version=__version__,
    )


def vectors_eta(waiting: int, pipeline: Rescanner | None) -> float | None:
    """Seconds until `waiting` chunks have their vectors, at the speed the pipeline has
    embedded so far (None: no speed measured yet)."""
    if not waiting:
        return 0.0
    s = pipeline.stats if pipeline is not None else None
    if s is None or s.embed_ms <= 0 or s.chunks_embedded <= 0:
        return None
    return round(waiting / (s.chunks_embedded / (s.embed_ms / 1000)), 1)


def progress(pipeline: Rescanner | None, size: int) -> IndexProgress:
    """How far the watched folder's pipeline has come, and the index's size in bytes."""
    s = pipeline.stats if pipeline is not None else Stats()
    n = s.counts()  # as `index` and the log give them
    return IndexProgress(
        files_seen=s.seen, files_added=n["added"], files_updated=n["updated"],
        files_removed=n["removed"], files_unchanged=n["unchanged"],
        files_skipped=n["skipped"],
        recent_skips=[SkippedFile(path=safe_text(p), reason=safe_text(r))
                      for p, r in s.recent_skips],
        files_in_flight=len(pipeline.inflight) if pipeline else 0,
        chunks_embedded=s.chunks_embedded,
        chunks_per_second=round(s.chunks_embedded / (s.embed_ms / 1000), 1) if (
            s.embed_ms > 0) else None,
        scan_done=s.scan_done, last_error=safe_text(s.last_error) if s.last_error else None,
        index_bytes=size)


def health(state: Status, *, opened: bool, watching: bool) -> HealthResult:
    """Liveness and readiness: `opened` when the model and the index are there, `watching`
    when this process feeds the index from a folder (then readiness waits for its first
    scan)."""
    return HealthResult(
        alive=state.phase != "failed",
        ready=opened and state.phase != "failed" and (
            state.initial_indexing_done or not watching),
        phase=state.phase, role=state.role, model_ready=state.model_ready,
        initial_indexing_done=state.initial_indexing_done, version=__version__,
    )
