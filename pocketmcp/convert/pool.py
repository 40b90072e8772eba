"""Document conversion, contained: a small pool of worker processes with limits.

Each conversion runs in a `convert.worker` process with an address-space cap
(CONVERT_MEMORY_MB) and a wall-clock limit (CONVERT_TIMEOUT_S). A file that spins is killed
with its worker; one that exhausts memory or crashes its parser ends only its worker. Either
way the file is reported and skipped, and the next conversion gets a fresh worker.
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
from pocketmcp.convert.kinds import Converted
from pocketmcp.convert.limits import Limits
from pocketmcp.convert.worker import HEADER, Reply, Request
from pocketmcp.embed.priority import lower
from pocketmcp.errors import DocumentError

log = logs.get("pocketmcp.convert")
_START_S = 30.0  # longest wait for a new worker to be ready, seconds


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


class Converter:
    """Converts documents in worker processes; at most `workers` at once."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._slots = anyio.Semaphore(limits.workers)
        self._idle: list[_Worker] = []
        self._encoder = msgspec.msgpack.Encoder()
        self.started = 0  # worker processes started, for tests and status

    async def convert(self, kind: str, data: bytes, name: str) -> Converted:
        """Markdown of `data` (a `kind` file called `name`); DocumentError when it cannot be
        converted within the limits."""
        request = self._encoder.encode(Request(
            kind=kind, data=data, max_chars=self.limits.max_chars,
            max_unpacked=self.limits.max_unpacked))
        async with self._slots:
            try:
                worker = await self._take()
            except (TimeoutError, anyio.EndOfStream, anyio.IncompleteRead,
                    anyio.BrokenResourceError) as exc:
                raise DocumentError(name, "the converter could not start "
                                          f"({type(exc).__name__})") from None
            try:
                with anyio.fail_after(self.limits.timeout_s):
                    reply = await worker.ask(request)
            except TimeoutError:
                await worker.kill()
                raise DocumentError(name, f"conversion took longer than "
                                          f"{self.limits.timeout_s:g} s (CONVERT_TIMEOUT_S) and "
                                          "was stopped") from None
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                    anyio.ClosedResourceError):
                code = await worker.kill()
                raise DocumentError(name, f"the converter stopped ({_exit(code)}) while reading "
                                          f"this {kind} file; it was probably out of memory "
                                          f"(CONVERT_MEMORY_MB={self.limits.memory_mb}) or hit "
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
        return Converted(reply.text, reply.title, reply.pages, reply.properties)

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            # Workers exit by themselves after idle_s; retire them a little before that.
            fresh = anyio.current_time() - worker.last_used < self.limits.idle_s * 0.8
            if fresh and worker.process.returncode is None:
                return worker
            await worker.kill()
        process = await anyio.open_process(
            [sys.executable, "-m", "pocketmcp.convert.worker", str(self.limits.memory_mb),
             str(self.limits.idle_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
        lower(process.pid)  # conversions are indexing: below searches (embed/priority.py)
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


def _exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
