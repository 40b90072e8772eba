"""The PocketError tree: every error PocketMCP raises on purpose, each with its code.

`code` starts the message of the tool error a client sees ("NOT_FOUND: ..."). Messages are
built from structured arguments where the same error is raised in several places.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any


class PocketError(Exception):
    """Base of every error PocketMCP raises on purpose."""

    code = "ERROR"


# -- what a request asked for ------------------------------------------------------------------

class InvalidRequest(PocketError):
    """The request's arguments cannot be served as given."""

    code = "INVALID_REQUEST"


class UnsupportedFormat(InvalidRequest):
    """No converter reads files of this kind."""

    code = "UNSUPPORTED_FORMAT"


class NotSupported(InvalidRequest):
    """The index's store cannot do this yet (a feature of SQLite indexes only, so far)."""

    code = "NOT_SUPPORTED"


class InvalidPattern(InvalidRequest):
    """A glob or pattern that cannot be read, or longer than its cap."""

    code = "INVALID_PATTERN"


class ImportRefused(InvalidRequest):
    """A line of an export file cannot be imported; `line` is its number (0: the file as a
    whole). Nothing was imported."""

    code = "IMPORT_REFUSED"

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


class TooFewQuestions(PocketError):
    """The index's documents give too few questions to measure its search by."""

    code = "TOO_FEW_QUESTIONS"


class LimitExceeded(InvalidRequest):
    """A request larger than a documented cap (filter keys, values, body size)."""

    code = "LIMIT_EXCEEDED"


class DeadlineExceeded(PocketError):
    """A search ran past SEARCH_TIMEOUT_S; it was stopped and nothing was answered."""

    code = "DEADLINE_EXCEEDED"


class NotFound(PocketError):
    """What the request names does not exist."""

    code = "NOT_FOUND"


class FetchFailed(PocketError):
    """A page could not be downloaded."""

    code = "FETCH_FAILED"


# -- the state of this process -----------------------------------------------------------------

class NotReady(PocketError):
    """The model or the index is still loading (or its chunks still wait for vectors)."""

    code = "NOT_READY"


class ReadOnly(PocketError):
    """This process does not hold the writer lock of the index."""

    code = "READ_ONLY"


class Busy(PocketError):
    """The same long operation is already running."""

    code = "BUSY"


class Stopping(PocketError):
    """The process is shutting down (or the part asked for is not running)."""

    code = "STOPPING"


class OtherFolder(PocketError):
    """The index holds another folder of this machine: feeding it this one would remove
    that one's documents."""

    code = "OTHER_FOLDER"


class AlreadyServing(PocketError):
    """An HTTP server of this index runs already."""

    code = "ALREADY_SERVING"


class ListenFailed(PocketError):
    """The HTTP server cannot listen on the address asked for."""

    code = "LISTEN_FAILED"


class ConfigError(PocketError):
    def __init__(self, variable: str, value: object, accepts: str) -> None:
        self.variable = variable
        self.value = value
        self.accepts = accepts
        super().__init__(f"{variable}={value!r} is not valid: {variable} accepts {accepts}")


class WeakToken(ConfigError):
    """A token too short or too simple for a server reachable beyond loopback."""

    code = "WEAK_TOKEN"


# -- infrastructure ----------------------------------------------------------------------------

class StoreError(PocketError):
    """The database could not be opened, read or written."""


class ModelMismatchError(StoreError):
    """The index was built by another provider, model, dimension or prefixes."""

    def __init__(self, db_path: Path | str, stored: str, differences: list[str]) -> None:
        self.differences = differences
        super().__init__(
            f"the index {db_path} was built with {stored}, and the settings differ: "
            + "; ".join(differences) + ". Vectors from different models or prefixes cannot "
            "be mixed. Either set the embedding settings back (EMBED_PROVIDER, EMBED_MODEL, "
            "EMBED_DIMENSIONS, EMBED_DOC_PREFIX, EMBED_QUERY_PREFIX), point SQLITE_PATH at "
            "another file, or rebuild this index with `pocketmcp index --rebuild`."
        )


class SchemaTooNewError(StoreError):
    def __init__(self, db_path: Path | str, found: int, known: int) -> None:
        super().__init__(
            f"the index {db_path} has schema version {found}, newer than this PocketMCP "
            f"understands ({known}); upgrade PocketMCP or point SQLITE_PATH at another file"
        )


class WriterBusyError(StoreError):
    def __init__(self, db_path: Path) -> None:
        super().__init__(
            f"another PocketMCP process holds the writer lock of {db_path}; "
            "this one can only read the index"
        )


class DiskFull(StoreError):
    """The disk holding the index (or a file being written) is full."""

    code = "DISK_FULL"


class VectorFileError(StoreError):
    """An index's vector file is missing, damaged or out of step; searches answer from
    SQLite until it is rebuilt."""


class EmbeddingError(PocketError):
    """The embedding model could not be loaded or run."""


class ProviderError(EmbeddingError):
    """A remote embedding provider failed a call. `retry_in`: seconds until it is tried
    again; meanwhile calls fail at once with this error."""

    def __init__(self, message: str, *, retry_in: float | None = None) -> None:
        self.retry_in = retry_in
        super().__init__(message)


class ProviderUnavailable(ProviderError):
    """The provider did not answer, or answered with errors that retries did not cure."""

    code = "EMBEDDING_UNAVAILABLE"


class ProviderRejected(ProviderError):
    """The provider refused the request as configured (a key, a model, a dimension): the
    message names the setting to fix."""

    code = "EMBEDDING_REJECTED"


class ModelLoading(EmbeddingError):
    """The model is being loaded (at start, or again after it was unloaded when idle):
    searches answer with keyword results meanwhile."""

    code = "MODEL_LOADING"


class SharingFailed(PocketError):
    """The shared HTTP server of an index could not be started or reached again."""

    code = "SERVER_UNAVAILABLE"


class SettingsMismatch(PocketError):
    """The shared server of an index runs with another setting of the index (its model, its
    folder) than the process that would use it."""

    code = "SETTINGS_MISMATCH"


class InputRejected(EmbeddingError):
    """The provider refused some texts while it took others. `rejected`: position -> reason;
    `vectors`: every row, the rejected ones zero."""

    code = "INVALID_REQUEST"

    def __init__(self, rejected: dict[int, str], vectors: Any) -> None:
        self.rejected = rejected
        self.vectors = vectors
        first = next(iter(rejected.values()), "")
        super().__init__(f"the embedding provider refused {len(rejected)} text(s): {first}")


class DocumentError(PocketError):
    """One document could not be read or converted; the pipeline skips it and goes on."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def disk_full(exc: BaseException, where: str | None = None) -> DiskFull | None:
    """DISK_FULL, naming the path and what to do, when `exc`, what caused it, or an error
    inside it (an exception group: a task group's failures together) is a full disk (ENOSPC,
    or SQLite's "database or disk is full"); None otherwise. `where`: the index, named when
    the error does not say which file it was writing."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo and len(seen) < 100:  # causes and group members, bounded
        found = todo.pop(0)
        if id(found) in seen:
            continue
        seen.add(id(found))
        path = None
        if isinstance(found, OSError) and found.errno == errno.ENOSPC:
            path = found.filename
        elif isinstance(found, BaseExceptionGroup) or "database or disk is full" not in str(found):
            if isinstance(found, BaseExceptionGroup):
                todo.extend(found.exceptions)
            todo.extend(e for e in (found.__cause__, found.__context__) if e is not None)
            continue
        place = str(path or where or "the index")
        return DiskFull(
            f"the disk holding {place} is full. What was committed before is intact; free "
            "some space there (or point SQLITE_PATH at a disk with room) and run the same "
            "command again: it completes what is missing")
    return None


def single(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one error inside nested exception groups (anyio's task groups wrap every child's
    failure in one), else the group itself."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    return found
