"""One warm server per index, started by the first editor.

An editor starts `pocketmcp` on stdio. With SHARE=on that process looks for the HTTP server of
its index (the index's discovery file, mcp/discovery.py); when none runs it starts one in
the background and relays to it (mcp/bridge.py), and every later editor relays to the same
one. The parts of that, and of the server's side of it (each file named is one of the index's
own, Place.beside: `index.db.server.lock` beside a SQLite index):

- `ensure`: find the server, or start one under the start lock (`server.lock`), so that
  editors starting at the same moment start exactly one. The one holding the lock starts the
  server; the others wait for the lock, then find it.
- `spawn`: the server as its own process, detached from the editor (a session of its own, no
  terminal, stdin from /dev/null), its output appended to the index's `server.log`, started
  with POCKETMCP_STARTED_BY=editor so that it exits once idle (mcp/attached.py, on the
  server's side).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio
from filelock import FileLock, Timeout

from pocketmcp import logs, private
from pocketmcp.core.secret import Secret
from pocketmcp.errors import SharingFailed
from pocketmcp.mcp import discovery

if TYPE_CHECKING:
    from pocketmcp.mcp.upstream import Upstream
    from pocketmcp.store.api import Place  # numpy: a bridge loads none of it

log = logs.get("pocketmcp.sharing")

T = TypeVar("T")

START_S = 60.0  # longest wait for a started server to answer, and for the start lock
POLL_S = 0.05  # how often the lock and the discovery file are looked at meanwhile


def lock_file(place: Place) -> Path:
    return place.beside("server.lock")


def log_file(place: Place) -> Path:
    return place.beside("server.log")


@contextlib.asynccontextmanager
async def start_lock(place: Place, timeout_s: float = START_S) -> AsyncIterator[None]:
    """Hold the start lock of the index at `place` (a file lock, as a SQLite index's writer
    lock is held: released by the system if this process dies); SharingFailed after
    `timeout_s`."""
    path = lock_file(place)
    private.folder(path.parent)
    # Not thread-local: taken and released by this task, whichever thread runs it.
    lock = FileLock(str(path), blocking=False, thread_local=False, mode=private.FILE_MODE)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            lock.acquire()
            break
        except Timeout:
            if time.monotonic() > deadline:
                raise SharingFailed(
                    f"another process has held {path} for {timeout_s:.0f} s while starting "
                    "the shared server; set SHARE=off to serve on its own") from None
            await anyio.sleep(POLL_S)
    try:
        yield
    finally:
        lock.release()


def check_start_lock(place: Place) -> None:
    """OSError when the start lock of the index at `place` cannot be opened at all (so that
    no shared server could be started): checked before a bridge answers a handshake while
    one starts."""
    path = lock_file(place)
    private.folder(path.parent)
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, private.FILE_MODE))


def spawn(place: Place, command: list[str], env: dict[str, str], cwd: Path
          ) -> subprocess.Popen[bytes]:
    """Start the shared server of the index at `place`: detached from this process's
    session and terminal, its output appended to the index's server log."""
    path = log_file(place)
    private.file(path)
    with open(path, "ab") as out:
        out.write(f"--- started {time.strftime('%Y-%m-%dT%H:%M:%S')} by pid {os.getpid()}\n"
                  .encode())
        out.flush()
        kwargs: dict[str, object] = {}
        if os.name == "nt":
            kwargs["creationflags"] = (subprocess.DETACHED_PROCESS  # type: ignore[attr-defined]
                                       | subprocess.CREATE_NEW_PROCESS_GROUP)  # type: ignore[attr-defined]
        else:
            kwargs["start_new_session"] = True
        process: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
            close_fds=True, **kwargs)
        return process


def server_command(title: str, instructions: str | None) -> list[str]:
    """How this process's `pocketmcp serve` is run over HTTP (its settings come through
    the environment)."""
    command = [sys.executable, "-m", "pocketmcp", "serve", "--title", title]
    if instructions is not None:
        command += ["--inst", instructions]
    return command


async def wait_published(place: Place, process: subprocess.Popen[bytes],
                         timeout_s: float = START_S) -> discovery.Published:
    """The discovery file `process` writes once it serves, after its health answers;
    SharingFailed when it exits first or takes longer than `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            raise SharingFailed(f"the shared server of {place.describe()} exited at start "
                                f"(code {code}); its log is {log_file(place)}")
        # Read without discovery.find: its liveness check could reap `process` ending just
        # now, and its exit code would be lost (0 for the next poll).
        found = discovery.published(place)
        if found is not None and found.pid == process.pid and (
                await discovery.answers(found.url) is not None):
            return found
        await anyio.sleep(POLL_S)
    process.kill()
    raise SharingFailed(f"the shared server of {place.describe()} did not answer within "
                        f"{timeout_s:.0f} s; its log is {log_file(place)}")


async def ensure(place: Place, find: Callable[[], Awaitable[T | None]],
                 start: Callable[[], subprocess.Popen[bytes]]) -> T:
    """What `find` gives for the running server of the index at `place`, starting it first
    (`start`)
    when none runs. Under the start lock, so that one server starts however many callers
    come at once."""
    found = await find()
    if found is not None:
        return found
    async with start_lock(place):
        found = await find()  # another caller started it while this one waited
        if found is not None:
            return found
        began = time.perf_counter()
        process = start()
        try:
            published = await wait_published(place, process)
        except SharingFailed:
            # It may have exited because another already serves (one started by a process
            # that died holding this lock, say, and published meanwhile): that one is used.
            found = await find()
            if found is None:
                raise
            log.info("shared_server_found", after="the one started here exited",
                     code=process.poll())
            return found
        log.info("shared_server_started", pid=published.pid, url=published.url,
                 log=str(log_file(place)), seconds=round(time.perf_counter() - began, 3))
        found = await find()
    if found is None:
        raise SharingFailed(f"the shared server of {place.describe()} started but cannot be used "
                            "(see the warning above)")
    return found


async def described(place: Place, upstream: Upstream | None, *, on: bool) -> str:
    """One line for `doctor`: whether editors share a server of the index at `place`, and,
    while one
    runs (`upstream`, as locate found it), who started it, and, when it takes this
    process's token, its clients, the model's state and its memory."""
    if upstream is None:
        return ("sharing on: no server of this index runs now; the first editor starts one "
                f"(its log: {log_file(place)})" if on else
                "sharing off (SHARE=off): each editor runs a server of its own")
    found = upstream.server
    who = "an editor (it exits once idle)" if found.started_by == "editor" else "you"
    line = f"a shared server started by {who} serves this index at {found.url} (pid {found.pid})"
    if upstream.token is None:
        return line
    state = await _status(found.url, upstream.token)
    shared = state.get("sharing") if state is not None else None
    if not isinstance(shared, dict):
        return line
    return (f"{line}: {shared.get('clients')} client(s), model {shared.get('model_state')}, "
            f"{shared.get('memory_mib')} MiB")


async def _status(url: str, token: Secret) -> dict[str, object] | None:
    import httpx2  # heavy: only when a server runs

    try:
        async with httpx2.AsyncClient(timeout=5.0, trust_env=False) as client:
            response = await client.get(url + "/status.json", headers={
                "Authorization": f"Bearer {token.reveal()}"})
        if response.status_code != 200:
            return None
        found: dict[str, object] = response.json()
        return found
    except (httpx2.HTTPError, ValueError):
        return None
