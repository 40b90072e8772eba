"""The files of an index's own that let processes find its HTTP server (Place.beside: beside
a SQLite index's file, `index.db.token` and `index.db.server.json`): the access token and the
discovery file (URL, pid, token file).

Both are written atomically with mode 0600. The discovery file exists while an HTTP server
runs and is removed when it stops; one left behind by a process that died is ignored (its pid
is gone) and replaced by the next server. A server that finds the file gone, or naming a
server that does not answer, publishes itself again (`keep_published`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from pocketmcp import logs, private
from pocketmcp.core.secret import Secret
from pocketmcp.errors import StoreError

if TYPE_CHECKING:  # numpy: a bridge names the index's place and loads none of it
    from pocketmcp.config import Config
    from pocketmcp.store.api import Place

log = logs.get("pocketmcp.discovery")

KEEP_S = 1.0  # how often a server looks that the discovery file still names it


class Published(msgspec.Struct, frozen=True, kw_only=True):
    """What the discovery file says about the HTTP server of an index."""

    url: str  # the base URL: /mcp, /sse, /tools and /health are beneath it
    pid: int
    index: str  # the index's place, described
    token_file: str | None  # None: the server's token came from POCKETMCP_TOKEN
    version: str
    started_by: str = "user"  # or "editor": a shared server that exits once idle
    # The settings of the index it serves with (index_settings): its embedding
    # model (provider:model) and watched folder. None: not said (or no folder watched).
    model: str | None = None
    folder: str | None = None

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"


def server_file(place: Place) -> Path:
    return place.beside("server.json")


def token_file(place: Place) -> Path:
    return place.beside("token")


def _write_private(path: Path, data: bytes, *, replace: bool) -> bool:
    """Write `data` to `path` with mode 0600, atomically. With `replace` False an existing
    file is kept and False returned."""
    private.folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails if another process made it first
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read_token(path: Path) -> Secret:
    """The token kept in `path`; a file others can read is made private first."""
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            os.chmod(path, 0o600)
            log.warning("token_file_made_private", path=str(path))
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise StoreError(f"cannot read the token file {path}: {exc.strerror}") from exc
    if not text:
        raise StoreError(f"the token file {path} is empty; delete it to have a new one made")
    return Secret(text)


def ensure_token(place: Place) -> tuple[Secret, Path, bool]:
    """The token of the index at `place`, made on first use: (token, its file, whether this
    call made it)."""
    path = token_file(place)
    created = False
    if not path.exists():
        try:
            created = _write_private(path, secrets.token_urlsafe(32).encode() + b"\n",
                                     replace=False)
        except OSError as exc:
            raise StoreError(f"cannot write the token file {path}: {exc.strerror}") from exc
    return read_token(path), path, created


def publish(place: Place, server: Published) -> Path:
    """Write the discovery file of the index at `place`."""
    path = server_file(place)
    try:
        _write_private(path, msgspec.json.encode(server) + b"\n", replace=True)
    except OSError as exc:
        raise StoreError(f"cannot write the discovery file {path}: {exc.strerror}") from exc
    return path


async def keep_published(place: Place, server: Published, every_s: float = KEEP_S) -> None:
    """While `server` (this process) serves: publish it again whenever the discovery file of
    the index at `place` is gone or names a server that does not answer (one that replaced
    it while this one did not answer, then stopped or hung), so that a server never serves
    where no client can find it. One that answers is left published."""
    displaced_by = None
    while True:
        await anyio.sleep(every_s)
        found = published(place)
        if found is not None and found.pid == server.pid:
            displaced_by = None
            continue
        if found is not None and alive(found.pid) and await answers(found.url) is not None:
            if displaced_by != found.pid:
                log.warning("discovery_file_names_another", url=found.url, pid=found.pid)
                displaced_by = found.pid
            continue
        try:
            publish(place, server)
        except StoreError as exc:
            log.warning("publish_failed", error=str(exc))
            continue
        log.info("published_again", url=server.url, replaced=found.pid if found else None)


def withdraw(place: Place, pid: int) -> None:
    """Remove the discovery file of the index at `place` if it is still the one process
    `pid` wrote."""
    path = server_file(place)
    found = _read(path)
    if found is not None and found.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def published(place: Place) -> Published | None:
    """What the discovery file of the index at `place` says, whether its process runs or
    not."""
    return _read(server_file(place))


def find(place: Place) -> Published | None:
    """The HTTP server the discovery file of the index at `place` names, if its process is
    alive."""
    found = published(place)
    if found is None or found.pid == os.getpid() or not alive(found.pid):
        return None
    return found


def _read(path: Path) -> Published | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Published)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError) as exc:
        log.warning("discovery_file_unreadable", path=str(path), error=str(exc))
        return None


async def answers(url: str, path: str = "/health", token: str | None = None,
                  timeout_s: float = 2.0) -> int | None:
    """The HTTP status of GET `url` + `path` (with the bearer `token`), or None when nothing
    answers there in time. Proxy settings are ignored: the server is on this machine."""
    import httpx2  # heavy (some 70 modules): only once a published server is to be asked

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with httpx2.AsyncClient(timeout=timeout_s, trust_env=False) as client:
            response = await client.get(url + path, headers=headers)
    except httpx2.HTTPError:
        return None
    return response.status_code


def alive(pid: int) -> bool:
    """Whether a process `pid` exists (of any user)."""
    if pid <= 0:
        return False
    if os.name == "nt":  # no signal 0 there; the caller's HTTP probe decides
        return True
    try:  # a child of this process (a shared server it started) that ended is reaped
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:  # not a child of this process
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def index_settings(config: Config) -> tuple[str, str | None]:
    """What of `config` belongs to the index, as its server publishes it: the embedding
    model (provider:model) and the watched folder (None: it watches none)."""
    from pocketmcp.embed.settings import DEFAULT_MODEL_ID

    embed = config.embed
    model = embed.model or (DEFAULT_MODEL_ID if embed.provider == "local" else "(its default)")
    watching = config.watched.given or config.watched.root.is_dir()
    return f"{embed.provider}:{model}", str(config.watched.root.resolve()) if watching else None
