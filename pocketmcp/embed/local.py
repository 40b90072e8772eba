"""The built-in provider: a fastembed ONNX session for documents and, for the default
model, a second small session for queries. Both run in worker threads.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import anyio
import msgspec
import numpy as np
from tokenizers import Tokenizer

from pocketmcp import logs
from pocketmcp.core.identity import Identity
from pocketmcp.embed.base import F32, Batching, Usage, normalised
from pocketmcp.embed.keeper import IdleUnloader, ModelState, give_back_memory
from pocketmcp.embed.models import BUNDLED_MAX_TOKENS, ModelSpec, folder_tokenizer
from pocketmcp.embed.prefixes import family
from pocketmcp.embed.priority import Lowered
from pocketmcp.embed.settings import DEFAULT_MODEL_ID, index_threads
from pocketmcp.errors import EmbeddingError, ModelLoading

log = logs.get("pocketmcp.embed")

QUERY_CACHE = 1024  # query vectors kept (1.5 KiB each at 384 dimensions), least recent out


def local_identity(spec: ModelSpec, doc_prefix: str | None = None,
                   query_prefix: str | None = None) -> Identity:
    """The local model's identity: its prefixes are its family's unless given."""
    known = family(spec.model_id)
    return Identity(model=spec.model_id, dim=spec.dim,
                    doc_prefix=known.doc_prefix if doc_prefix is None else doc_prefix,
                    query_prefix=known.query_prefix if query_prefix is None else query_prefix)


class LocalEmbedder:
    """One onnxruntime session for documents (one batch at a time) and a query session.

    Making one loads the model: do it in a worker thread. For the built-in model that is its
    tokenizer only (milliseconds); the query session is made on the first query and the
    documents' session (fastembed's, about a second with its import) on the first batch of
    documents, so a server that only searches is ready sooner. Other models load whole here.
    The embed methods are async and run the model in worker threads: document batches one at
    a time on a thread of lower OS priority (with at most `index_threads` threads of the
    model's own, 0: one per core), queries two at a time at normal priority.

    With `idle_unload_s`, both sessions are dropped after that long unused (embed/keeper.py);
    a query then loads its session again in the background and raises ModelLoading meanwhile
    (searches answer by keywords), while documents wait for theirs.
    """

    def __init__(self, spec: ModelSpec, identity: Identity | None = None,
                 batching: Batching | None = None, *, idle_unload_s: float = 0,
                 index_threads: int = 0) -> None:
        self.spec = spec
        self.identity = identity or local_identity(spec)
        self.model_id = spec.model_id
        self.batching = batching or Batching(size=1, tokens=4096)
        self.usage = Usage()
        self.where: str | None = None
        self._model: Any = None  # fastembed's TextEmbedding, for documents
        self._model_lock = threading.Lock()
        own = spec.path if self._own_query_session() else None
        self.tokenizer: Tokenizer = (folder_tokenizer(own) if own is not None
                                     else self._documents_model().model.tokenizer)
        truncation = self.tokenizer.truncation or {}
        window = int(truncation.get("max_length", BUNDLED_MAX_TOKENS))
        prefix = self.identity.doc_prefix
        # The document prefix takes its place in the window ([CLS] and [SEP] are counted once).
        self.max_tokens = window - (len(self.tokenizer.encode(prefix).ids) - 2 if prefix else 0)
        self.dim = spec.dim
        self._queries: QueryEncoder | None = None
        self._query_lock = threading.Lock()
        self._documents_limiter = anyio.CapacityLimiter(1)
        self._query_limiter = anyio.CapacityLimiter(2)
        self._recent: OrderedDict[tuple[str, str], F32] = OrderedDict()  # of query vectors
        self._recent_lock = threading.Lock()
        self._index_threads = index_threads
        self._lowered = Lowered()  # the documents' thread: indexing never starves searches
        self.model_state = ModelState()
        self._idle = IdleUnloader(self.model_state, idle_unload_s, self.unload) if (
            idle_unload_s > 0) else None

    async def embed_documents(self, texts: list[str]) -> F32:
        started = time.perf_counter()
        self.model_state.begin()
        try:
            async with self._documents_limiter:
                return await self._lowered.run(self.embed, texts)
        finally:
            self.model_state.end()
            self.usage.answered(len(texts), started)

    async def embed_query(self, text: str) -> F32:
        started = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(self.embed_query_now, text,
                                                  limiter=self._query_limiter)
        finally:
            self.usage.answered(1, started)

    async def aclose(self) -> None:
        if self._idle is not None:
            self._idle.stop()
        self._lowered.close()

    async def load_documents(self) -> None:
        async with self._documents_limiter:
            await self._lowered.run(self._documents_model)

    def unload(self) -> bool:
        """Drop the model's sessions and give their memory back, unless it is in use (then
        False). The query vectors kept for recent queries stay."""
        state = self.model_state
        with state.lock:
            if state.busy or state.state != "loaded":
                return False
            state.state = "unloaded"
            state.unloads += 1
        with self._model_lock, self._query_lock:
            self._model = self._queries = None
        give_back_memory()
        log.info("model_unloaded", model=self.model_id,
                 idle_s=round(state.idle_for(), 1))
        return True

    def _reload_soon(self) -> None:
        """Load what queries need again, in a thread of its own (once at a time)."""
        state = self.model_state
        with state.lock:
            if state.state == "loading":
                return
            state.state = "loading"
        threading.Thread(target=self._reload, name="pocketmcp-model-load", daemon=True).start()

    def _reload(self) -> None:
        state = self.model_state
        started = time.perf_counter()
        try:
            if self._own_query_session():
                self._query_encoder()
            else:
                self._documents_model()
        except EmbeddingError as exc:
            log.error("model_load_failed", model=self.model_id, error=str(exc))
            with state.lock:
                state.state = "unloaded"
            return
        with state.lock:
            state.state = "loaded"
            state.loads += 1
            state.load_s = round(time.perf_counter() - started, 3)
            state.last_used = time.monotonic()
        log.info("model_loaded", model=self.model_id, seconds=state.load_s)

    def _own_query_session(self) -> bool:
        """Whether queries have a session of their own (the default, mean-pooled model)."""
        return self.spec.model_id == DEFAULT_MODEL_ID and self.spec.path is not None

    def _documents_model(self) -> Any:
        """fastembed's model for documents, loaded on first use (blocking)."""
        with self._model_lock:
            if self._model is None:
                spec = self.spec
                _quiet_loguru()
                # heavy (about a second with its import): only when documents are embedded
                from fastembed import TextEmbedding

                kwargs: dict[str, Any] = {}
                if spec.path is not None:
                    kwargs["specific_model_path"] = str(spec.path)
                    kwargs["local_files_only"] = True
                threads = index_threads(spec.threads, self._index_threads)
                try:
                    self._model = TextEmbedding(
                        spec.model_id, cache_dir=str(spec.cache_dir / "fastembed"),
                        threads=threads, **kwargs,
                    )
                except Exception as exc:  # onnxruntime, tokenizers and download failures
                    raise EmbeddingError(f"cannot load model {spec.model_id!r}: {exc}") from exc
            return self._model

    def _query_encoder(self) -> QueryEncoder | None:
        """The query session, made on the first query (indexing alone never needs it)."""
        spec = self.spec
        if not self._own_query_session():
            return None
        assert spec.path is not None
        with self._query_lock:
            if self._queries is None:
                self._queries = QueryEncoder(spec.path / "model.onnx", self.tokenizer)
        return self._queries

    def embed(self, texts: list[str]) -> F32:
        """Vectors of `texts` as one float32 array, rows normalised to length 1 (blocking)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.identity.doc_prefix:
            texts = [self.identity.doc_prefix + t for t in texts]
        model = self._documents_model()
        state = self.model_state
        if state.state == "unloaded":  # loaded again for documents (queries load their own)
            with state.lock:
                state.state = "loaded" if state.state == "unloaded" else state.state
        try:
            rows = list(model.embed(texts, batch_size=len(texts)))
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        return normalised(np.asarray(rows, dtype=np.float32))

    def embed_query_now(self, text: str) -> F32:
        """The vector of one query (blocking); a query asked recently is not embedded again.
        The vector is read-only: callers share it."""
        key = (self.model_id, text)
        with self._recent_lock:
            vector = self._recent.get(key)
            if vector is not None:
                self._recent.move_to_end(key)
                return vector
        state = self.model_state
        if state.state != "loaded":
            self._reload_soon()
            raise ModelLoading("the model is being loaded again, unloaded after "
                               "MODEL_IDLE_UNLOAD_S unused; it is ready in a moment")
        state.begin()
        try:
            vector = self._embed_query(text)
        finally:
            state.end()
        vector.setflags(write=False)
        with self._recent_lock:
            self._recent[key] = vector
            if len(self._recent) > QUERY_CACHE:
                self._recent.popitem(last=False)
        return vector

    def _embed_query(self, text: str) -> F32:
        text = self.identity.query_prefix + text
        queries = self._query_encoder()
        if queries is not None:
            return queries.embed(text)
        try:
            rows = list(self._documents_model().query_embed([text]))
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        vector: F32 = normalised(np.asarray(rows, dtype=np.float32))[0]
        return vector


class QueryOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How the query session runs (docs/studies.md compares them)."""

    threads: int = 1  # intra-op threads: a query is too small to split well over two cores
    level: str = "all"  # graph optimisation: disable, basic, extended or all
    arena: bool = True  # onnxruntime's CPU memory arena (buffers reused between runs)


class QueryEncoder:
    """A second, small onnxruntime session for queries of the default (mean-pooled) model.

    One thread that does not spin after each run: a query takes a few milliseconds and
    neither waits behind indexing batches nor steals the other core from the search. A query
    is encoded alone, unpadded: the model sees its own tokens only.
    """

    def __init__(self, onnx_path: Path, tokenizer: Tokenizer,
                 options: QueryOptions | None = None) -> None:
        import onnxruntime as ort  # heavy: imported with the first query

        options = options or QueryOptions()
        levels = {"disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                  "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                  "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = options.threads
        session_options.inter_op_num_threads = 1
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session_options.graph_optimization_level = levels[options.level]
        session_options.enable_cpu_mem_arena = options.arena
        try:
            self._session = ort.InferenceSession(str(onnx_path), sess_options=session_options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own errors
            raise EmbeddingError(f"cannot load {onnx_path}: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer

    def embed(self, text: str) -> F32:
        encoding = self._tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask,
                 "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = self._session.run(None, {k: v for k, v in feeds.items()
                                              if k in self._inputs})[0]
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        vector: F32 = normalised(pooled.astype(np.float32))[0]
        return vector


def _quiet_loguru() -> None:
    """fastembed logs through loguru: keep it on stderr and to warnings."""
    try:  # optional: fastembed's logger, present when fastembed is
        from loguru import logger
    except ImportError:
        return
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
