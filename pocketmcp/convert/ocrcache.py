"""OCR output kept by content hash, so a file is read by OCR once.

Re-indexing, renaming or moving a file, or rebuilding the index from scratch, finds the text
here instead of running OCR again. One small file per document, named by the SHA-256 of its
bytes and of the OCR settings that shape the text, in a folder beside the index (any store:
the cache holds no index data, only what the converter produced). Written atomically; a
damaged or unreadable entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import anyio
import msgspec

from pocketmcp import logs, private
from pocketmcp.convert.kinds import Converted
from pocketmcp.convert.limits import OcrLimits

log = logs.get("pocketmcp.convert")
_VERSION = b"ocr-cache 3"  # 2: keyed by the SHA-256 the index keeps; 3: no blank pages


class OcrCache:
    def __init__(self, folder: Path | None, limits: OcrLimits, engine: str) -> None:
        self.folder = folder
        # Settings that change what OCR reads are part of the key.
        self._salt = b"\0".join([_VERSION, engine.encode(), str(limits.model_dir).encode(),
                                 str(limits.max_pages).encode(),
                                 str(limits.max_pixels).encode()])
        self.hits = 0

    def key(self, kind: str, digest: str) -> str:
        """The entry of a `kind` file whose bytes have the SHA-256 `digest` (hex)."""
        return hashlib.sha256(b"\0".join([self._salt, kind.encode(), digest.encode()])
                              ).hexdigest()

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.msgpack"

    async def get(self, key: str) -> Converted | None:
        if self.folder is None:
            return None
        try:
            raw = await anyio.Path(self._path(key)).read_bytes()
            found = msgspec.msgpack.decode(raw, type=Converted)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        self.hits += 1
        return found

    async def put(self, key: str, converted: Converted) -> None:
        if self.folder is None:
            return
        try:
            await anyio.to_thread.run_sync(_write, self._path(key),
                                           msgspec.msgpack.encode(converted))
        except OSError as exc:  # a full disk or a read-only folder: OCR just runs again
            log.warning("ocr_cache_not_written", folder=str(self.folder), reason=str(exc))


def _write(path: Path, payload: bytes) -> None:
    private.folder(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
