"""Document conversion, contained: a small pool of worker processes with limits.

Each conversion runs in a `convert.worker` process with an address-space cap (1 GiB) and a
wall-clock limit (CONVERT_TIMEOUT_S). OCR (images, scanned PDF pages) runs in one more worker
of the same kind, with its own cap (2 GiB) and one thread fewer than the cores (at most
INDEX_CPU_BUDGET's share), at indexing's lower priority, so that indexing never takes every
core from searches. A file that spins is killed with its worker; one that exhausts memory
or crashes its parser ends only its worker. Either way the file is reported and skipped,
and the next conversion gets a fresh worker.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import anyio
import msgspec
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from pocketmcp import logs
from pocketmcp.convert import ocr
from pocketmcp.convert.kinds import Converted
from pocketmcp.convert.limits import Limits, OcrLimits
from pocketmcp.convert.ocrcache import OcrCache
from pocketmcp.convert.worker import HEADER, Reply, Request
from pocketmcp.embed.priority import lower
from pocketmcp.errors import DocumentError

log = logs.get("pocketmcp.convert")
_START_S = 30.0  # longest wait for a new worker to be ready, seconds
OCR_KINDS = frozenset({"image", "pdf"})  # formats whose text may need OCR


class _Worker:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.last_used = anyio.current_time()

    async def started(self) -> None:
        """Wait for the empty frame a worker sends once its imports are done."""
        size = HEADER.unpack(await self.stdout.receive_exactly(HEADER.size))[0]
        if size:
            raise anyio.BrokenResourceError

    async def ask(self, request: bytes) -> Reply:
        await self.stdin.send(HEADER.pack(len(request)) + request)
        size = HEADER.unpack(await self.stdout.receive_exactly(HEADER.size))[0]
        return msgspec.msgpack.decode(await self.stdout.receive_exactly(size), type=Reply)

    async def kill(self) -> int | None:
        """Stop the process (shielded: it must not outlive a cancelled caller)."""
        with anyio.CancelScope(shield=True):
            if self.process.returncode is None:
                self.process.kill()
            code = await self.process.wait()
            await self.process.aclose()
        return code


class _Pool:
    """At most `size` worker processes with one memory cap, started on demand."""

    def __init__(self, limits: Limits, size: int, memory_mb: int, memory_setting: str) -> None:
        self.limits = limits
        self.memory_mb = memory_mb
        self.memory_setting = memory_setting
        self._slots = anyio.Semaphore(size)
        self._idle: list[_Worker] = []
        self.started = 0

    async def ask(self, request: bytes, kind: str, name: str, timeout_s: float) -> Reply:
        async with self._slots:
            try:
                worker = await self._take()
            except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead,
                    anyio.BrokenResourceError) as exc:
                raise DocumentError(name, "the converter could not start "
                                          f"({type(exc).__name__})") from None
            try:
                with anyio.fail_after(timeout_s):
                    reply = await worker.ask(request)
            except TimeoutError:
                await worker.kill()
                raise DocumentError(name, f"conversion took longer than {timeout_s:g} s "
                                          "(CONVERT_TIMEOUT_S) and was stopped") from None
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                    anyio.ClosedResourceError):
                code = await worker.kill()
                raise DocumentError(name, f"the converter stopped ({_exit(code)}) while reading "
                                          f"this {kind} file; it was probably out of memory "
                                          f"({self.memory_setting}, {self.memory_mb} MiB) or hit "
                                          "a parser crash") from None
            except BaseException:
                await worker.kill()  # cancelled mid-request: its reply would be stale
                raise
            if reply.fatal:
                await worker.kill()
            else:
                worker.last_used = anyio.current_time()
                self._idle.append(worker)
        if not reply.ok:
            raise DocumentError(name, reply.error)
        return reply

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            # Workers exit by themselves after idle_s; retire them a little before that.
            fresh = anyio.current_time() - worker.last_used < self.limits.idle_s * 0.8
            if fresh and worker.process.returncode is None:
                return worker
            await worker.kill()
        process = await anyio.open_process(
            [sys.executable, "-m", "pocketmcp.convert.worker", str(self.memory_mb),
             str(self.limits.idle_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        # Conversion and OCR are indexing: at its level, below searches (embed/priority.py).
        lower(process.pid)
        self.started += 1
        worker = _Worker(process)
        try:
            # Interpreter start-up is not the file's fault: it gets its own, wider bound.
            with anyio.fail_after(max(_START_S, self.limits.timeout_s)):
                await worker.started()
        except BaseException:
            await worker.kill()
            raise
        return worker

    async def aclose(self) -> None:
        workers, self._idle = self._idle, []
        for worker in workers:
            await worker.kill()


class Converter:
    """Converts documents in worker processes; at most `workers` at once, plus one OCR
    worker (its own memory cap and thread count) for images and scanned PDF pages."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._pool = _Pool(limits, limits.workers, limits.memory_mb,
                           "the converter's memory cap")
        self._ocr_pool = _Pool(limits, 1, max(limits.memory_mb, limits.ocr.memory_mb),
                               "the OCR worker's memory cap")
        self._encoder = msgspec.msgpack.Encoder()
        self.ocr_off = ocr_off(limits.ocr)  # why OCR does not run, or None
        self.cache = OcrCache(None if self.ocr_off else limits.ocr.cache_dir, limits.ocr,
                              ocr.engine_version() if not self.ocr_off else "")
        self.ocr_runs = 0  # documents read by OCR (not found in the cache), for tests and bench

    @property
    def started(self) -> int:
        """Worker processes started, for tests and status."""
        return self._pool.started + self._ocr_pool.started

    @property
    def _idle(self) -> list[_Worker]:
        """The document workers waiting for work."""
        return self._pool._idle

    def may_ocr(self, kind: str | None) -> bool:
        """Whether converting a `kind` file may run OCR (and so take seconds)."""
        return kind in OCR_KINDS and self.ocr_off is None

    def ocr_status(self) -> str:
        """One line on OCR for the status: on and with what, or why not."""
        if self.ocr_off:
            return f"off: {self.ocr_off}"
        o = self.limits.ocr
        return (f"on: {ocr.engine_version()}, PP-OCRv4 "
                f"{f'models in {o.model_dir}' if o.model_dir else 'Chinese and English models'}"
                f", {o.threads} thread{'s' if o.threads > 1 else ''}")

    async def convert(self, kind: str, data: bytes, name: str, digest: str) -> Converted:
        """Markdown of `data` (a `kind` file called `name`, whose SHA-256 is `digest`);
        DocumentError when it cannot be converted within the limits. Images and scanned PDF
        pages are read by OCR, once per content: the text is kept in the OCR cache, under a
        key made from `digest` (the bytes are not hashed again)."""
        if kind == "image" and self.ocr_off:
            raise DocumentError(name, f"image not read: {self.ocr_off}")
        o = self.limits.ocr
        spec = ocr.OcrSpec(max_pixels=o.max_pixels, max_pages=o.max_pages, threads=o.threads,
                           model_dir=str(o.model_dir) if o.model_dir else None,
                           budget_s=self.limits.ocr_budget_s) if kind in OCR_KINDS else None
        key = self.cache.key(kind, digest) if spec is not None and self.cache.folder else ""
        if key and (cached := await self.cache.get(key)) is not None:
            return cached
        first = await self._pool.ask(self._request(kind, data, spec), kind, name,
                                     self.limits.timeout_s)
        if spec is None or not first.scanned:
            return _converted(first)
        if self.ocr_off:
            if not first.text.strip():
                raise DocumentError(name, f"scanned PDF with no text layer not read: "
                                          f"{self.ocr_off}")
            log.info("scanned_pages_not_read", path=name, pages=first.scanned_total,
                     reason=self.ocr_off)
            return _converted(first)
        # Each page read by OCR gets the conversion time limit (the page cap bounds them), and
        # the file its OCR time budget (checked between pages: one page may run over it).
        pages = first.scanned
        timeout = self.limits.timeout_s
        second = await self._ocr_pool.ask(
            self._request(kind, data, msgspec.structs.replace(spec, run=True, pages=pages)),
            kind, name, min(timeout * (1 + len(pages)), self.limits.ocr_budget_s + 2 * timeout))
        self.ocr_runs += 1
        if first.scanned_total > len(pages):
            log.warning("ocr_page_cap", path=name, read=len(pages), scanned=first.scanned_total,
                        reason=f"at most {o.max_pages} scanned pages of a file are read")
        if second.unread:
            log.warning("ocr_time_budget", path=name, code="OCR_BUDGET_SPENT",
                        read=len(pages) - second.unread, unread=second.unread,
                        reason=f"the OCR time budget of {self.limits.ocr_budget_s:g} s a file "
                               "(twice CONVERT_TIMEOUT_S) was spent: the pages read are kept")
        result = _converted(second)
        if key and not result.unread:  # a scan stopped by the budget is not kept as read
            await self.cache.put(key, result)
        return result

    def _request(self, kind: str, data: bytes, spec: ocr.OcrSpec | None) -> bytes:
        return self._encoder.encode(Request(
            kind=kind, data=data, max_chars=self.limits.max_chars,
            max_unpacked=self.limits.max_unpacked, ocr=spec))

    async def aclose(self) -> None:
        await self._pool.aclose()
        await self._ocr_pool.aclose()


def ocr_off(limits: OcrLimits) -> str | None:
    """Why OCR does not run with these settings, or None when it does."""
    if limits.mode == "off":
        return "OCR is off (OCR=off)"
    return ocr.missing()


def _converted(reply: Reply) -> Converted:
    return Converted(reply.text, reply.title, reply.pages, reply.properties,
                     unread=reply.unread)


def _exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
