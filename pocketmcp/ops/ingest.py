"""Documents brought in on request: a file from an allowed folder, or a web page.

Both are converted like watched files (in the contained converter), then chunked, embedded
and written at once. Each has one identity per library, so asking again is answered by
content hash: `indexed` (new), `skipped` (same content), `replaced` (changed content).
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio

from pocketmcp.convert import kinds
from pocketmcp.convert.pool import Converter
from pocketmcp.core import dates
from pocketmcp.core.notes import converted_facts, read_note
from pocketmcp.core.paths import path_of, watched_id
from pocketmcp.core.safe import safe, safe_text
from pocketmcp.core.text import clean, decode, looks_binary, sha256, title_of
from pocketmcp.errors import (
    DocumentError,
    FetchFailed,
    InvalidRequest,
    NotFound,
    UnsupportedFormat,
)
from pocketmcp.messages import DocRecord
from pocketmcp.ops.checks import check_library, check_metadata
from pocketmcp.ops.results import IngestResult
from pocketmcp.ops.settings import IngestSettings
from pocketmcp.pipeline.settings import Watched
from pocketmcp.pipeline.watcher import path_filter
from pocketmcp.plans import Open, Writing

Status = Literal["indexed", "skipped", "replaced"]
STATUS: dict[str, Status] = {"inserted": "indexed", "unchanged": "skipped",
                             "updated": "replaced"}


# -- where a file may be read from ------------------------------------------------------------

def resolve_inside(path: str, roots: tuple[Path, ...], base: Path) -> Path:
    """`path` (relative ones against `base`) with symlinks resolved, if it lies inside one of
    `roots`; NotFound or InvalidRequest otherwise."""
    if not path.strip() or "\x00" in path:
        raise InvalidRequest("path is empty or holds a NUL character")
    given = Path(os.path.expanduser(path))
    if not given.is_absolute():
        given = base / given
    try:
        resolved = given.resolve(strict=True)
    except FileNotFoundError:
        raise NotFound(f"no file at {safe_text(path)!r}") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
        raise InvalidRequest(f"path {safe_text(path)!r} cannot be resolved: {exc}") from None
    # Component-wise: /data/kb-other is not inside /data/kb.
    if not any(resolved.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise InvalidRequest(f"path {safe_text(path)!r} is outside the allowed folders "
                             f"({allowed}); add its folder to ALLOWED_ROOTS to allow it")
    return resolved


# -- ingest_file -------------------------------------------------------------------------------

def _read_file(path: Path, max_bytes: int) -> tuple[bytes, int]:
    """The file's bytes and its modification time (ns)."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise InvalidRequest(f"{safe_text(str(path))} is not a regular file")
    if st.st_size > max_bytes:
        raise InvalidRequest(f"{safe_text(str(path))} is {st.st_size} bytes, over the limit of "
                             f"{max_bytes} (MAX_FILE_MB)")
    with open(path, "rb") as handle:
        return handle.read(max_bytes + 1), st.st_mtime_ns


def _identity(watched: Watched, watching: bool, resolved: Path, library: str | None
              ) -> tuple[str, str]:
    """(external_id, library). A file the watcher indexes anyway, asked for in its own
    library, is that same document; any other file is its own document per library."""
    watch = watched.root.resolve()
    if watching and resolved.is_relative_to(watch):
        rel = resolved.relative_to(watch).as_posix()
        own = watched.library_of(rel)
        if path_filter(watched).wants_file(rel) and library in (None, own):
            return watched_id(rel), own
    lib = check_library(library, watched.default_library)
    return f"path:{lib}:{resolved.as_posix()}", lib


async def ingest_file(open_writing: Open[Writing], converter: Converter,
                      settings: IngestSettings, path: str, *,
                      library: str | None, metadata: dict[str, Any] | None,
                      watching: bool) -> IngestResult:
    """Convert and index one file from WATCH_DIR or ALLOWED_ROOTS; `watching` says whether
    the watcher indexes WATCH_DIR in this process (its files are then the same documents)."""
    meta = check_metadata(metadata)
    watched = settings.watched
    if library is not None:
        library = check_library(library, watched.default_library)
    resolved = await anyio.to_thread.run_sync(
        lambda: resolve_inside(path, settings.roots(), watched.root))
    kind = _kind_by_name(resolved.name)
    writing = await open_writing()
    try:
        data, mtime_ns = await anyio.to_thread.run_sync(_read_file, resolved,
                                                        settings.max_file_bytes)
    except OSError as exc:
        raise InvalidRequest(f"cannot read {safe_text(path)!r}: {exc.strerror}") from None
    if len(data) > settings.max_file_bytes:
        raise InvalidRequest(f"{safe_text(path)!r} is over the limit of MAX_FILE_MB")
    external, lib = await anyio.to_thread.run_sync(_identity, watched, watching, resolved,
                                                   library)
    return await _ingest(writing, converter, data, kind, external_id=external, library=lib,
                         metadata=meta, source="file", uri=resolved.as_uri(),
                         name=resolved.name, fallback_title=resolved.stem, mtime_ns=mtime_ns,
                         folder=_folder(external, resolved))


def _folder(external_id: str, resolved: Path) -> str:
    """The folder a file's relative links start from: inside the watched folder for its
    documents, else the file's own absolute folder."""
    path = path_of(external_id, "file") or resolved.as_posix()
    return posixpath.dirname(path)


def _kind_by_name(name: str) -> str | None:
    """The format by file name; UnsupportedFormat for formats known to be unreadable."""
    reason = kinds.refused_by_name(name)
    if reason:
        raise UnsupportedFormat(f"{safe_text(name)}: {reason}")
    return kinds.kind_of(name)


# -- ingest_url --------------------------------------------------------------------------------

def check_url(url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise InvalidRequest(f"only http and https URLs can be ingested, not {safe_text(url)!r}")
    return url


async def _download(url: str, max_bytes: int, timeout_s: float) -> tuple[bytes, str, str]:
    """(body, content type, final URL) within the size and time limits."""
    import httpx  # heavy (about 0.2 s): only ingest_url needs it, kept out of start-up

    try:
        with anyio.fail_after(timeout_s):
            async with httpx.AsyncClient(follow_redirects=True, max_redirects=5,
                                         timeout=timeout_s) as client, client.stream(
                "GET", url, headers={"User-Agent": "PocketMCP",
                                     "Accept": "text/html,application/pdf,text/*;q=0.9,*/*;q=0.5"}
            ) as response:
                if response.status_code == 404 or response.status_code == 410:
                    raise NotFound(f"{safe_text(url)} answered HTTP {response.status_code}")
                if response.status_code >= 400:
                    raise FetchFailed(f"{safe_text(url)} answered HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise InvalidRequest(f"{safe_text(url)} is {declared} bytes, over the limit "
                                         f"of {max_bytes} (MAX_FILE_MB)")
                body = bytearray()
                async for part in response.aiter_bytes():
                    body += part
                    if len(body) > max_bytes:
                        raise InvalidRequest(f"{safe_text(url)} is over the limit of "
                                             f"{max_bytes} bytes (MAX_FILE_MB)")
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                return bytes(body), kind, str(response.url)
    except TimeoutError:
        raise FetchFailed(f"{safe_text(url)} did not finish downloading within {timeout_s:g} s "
                          "(the time one download may take)") from None
    except httpx.TooManyRedirects:
        raise FetchFailed(f"{safe_text(url)} redirects more than 5 times") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{safe_text(url)} could not be fetched: {exc}") from None


def _kind_of_page(body: bytes, content_type: str, url: str) -> str | None:
    kind = kinds.MIME_KINDS.get(content_type)
    if kind is None:
        kind = kinds.kind_of(urlsplit(url).path)
    if kind is None:
        if body.lstrip()[:5] == b"%PDF-":
            kind = "pdf"
        elif body.lstrip()[:200].lower().startswith((b"<!doctype html", b"<html")):
            kind = "html"
    return kind


async def ingest_url(open_writing: Open[Writing], converter: Converter,
                     settings: IngestSettings, url: str, *,
                     library: str | None, metadata: dict[str, Any] | None) -> IngestResult:
    """Download a page or document within MAX_FILE_MB and 30 s, and index it."""
    url = check_url(url)
    lib = check_library(library, settings.watched.default_library)
    meta = check_metadata(metadata)
    writing = await open_writing()
    body, content_type, final = await _download(url, settings.max_file_bytes,
                                                settings.url_timeout_s)
    kind = _kind_of_page(body, content_type, final)
    if kind is None and looks_binary(body):
        raise UnsupportedFormat(f"unsupported format: {safe_text(url)} is "
                                f"{content_type or 'binary content'}; readable formats are "
                                "HTML, PDF, Office files, EPUB, CSV and text")
    name = urlsplit(final).path.rsplit("/", 1)[-1] or urlsplit(final).netloc
    return await _ingest(writing, converter, body, kind, external_id=f"url:{lib}:{url}",
                         library=lib, metadata=meta, source="url", uri=final, name=name,
                         fallback_title=name)


# -- shared ------------------------------------------------------------------------------------

async def _ingest(writing: Writing, converter: Converter, data: bytes, kind: str | None, *,
                  external_id: str, library: str, metadata: dict[str, Any],
                  source: Literal["file", "url"], uri: str, name: str,
                  fallback_title: str, mtime_ns: int | None = None,
                  folder: str = "") -> IngestResult:
    digest = sha256(data)
    row = await writing.index.run(lambda r: r.document_by_external(external_id))
    if row is not None and (row.content_sha256, row.library, json.loads(row.metadata)) == (
            digest, library, metadata):
        return IngestResult(doc_id=row.doc_id, external_id=external_id, library=library,
                            status="skipped", chunks=row.chunk_count, title=row.title,
                            format=kind or kinds.TEXT)
    modified = dates.from_ns(mtime_ns) if mtime_ns else None
    if kind in kinds.CONVERTED:
        try:
            converted = await converter.convert(kind, data, name, digest)
        except DocumentError as exc:
            raise InvalidRequest(f"{safe_text(name)} could not be converted: {exc.reason}"
                                 ) from None
        text = clean(safe_text(converted.text))
        title = converted.title
        facts = converted_facts(safe(converted.properties), modified)
    else:
        if looks_binary(data):
            raise UnsupportedFormat(f"{safe_text(name)}: {kinds.refused_binary(name)}")
        text = clean(safe_text(decode(data)[0]))
        note = await anyio.to_thread.run_sync(
            lambda: read_note(text, folder=folder, modified=modified))
        title, facts = note.title, note.facts
    if not text.strip():
        raise InvalidRequest(f"{safe_text(name)} holds no text (a scanned PDF needs OCR first)")
    record = DocRecord(external_id=external_id, source=source, uri=uri,
                       title=safe_text(title or title_of(text, fallback_title)), content=text,
                       sha256=digest, library=library, metadata=metadata,
                       size_bytes=len(data), mtime_ns=mtime_ns, facts=facts)
    prepared = await writing.prepare.prepare([record], writing.index)
    written = (await writing.writes.store(prepared))[0]
    return IngestResult(doc_id=written.doc_id, external_id=external_id, library=library,
                        status=STATUS[written.status], chunks=written.chunks,
                        title=record.title, format=kind or kinds.TEXT)
