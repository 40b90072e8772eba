"""The PocketError tree: every error PocketMCP raises on purpose, each with its code.

`code` starts the message of the tool error a client sees ("NOT_FOUND: ..."). Messages are
built from structured arguments where the same error is raised in several places.
"""

from __future__ import annotations

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


class NotFound(PocketError):
    """What the request names does not exist."""

    code = "NOT_FOUND"


class FetchFailed(PocketError):
    """A page could not be downloaded."""

    code = "FETCH_FAILED"


# -- the state of this process -----------------------------------------------------------------

class NotReady(PocketError):
    """The model or the index is still loading."""

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


class ConfigError(PocketError):
    def __init__(self, variable: str, value: object, accepts: str) -> None:
        self.variable = variable
        self.value = value
        self.accepts = accepts
        super().__init__(f"{variable}={value!r} is not valid: {variable} accepts {accepts}")


# -- infrastructure ----------------------------------------------------------------------------

class StoreError(PocketError):
    """The database could not be opened, read or written."""


class ModelMismatchError(StoreError):
    def __init__(self, db_path: Path, stored: str, stored_dim: int, wanted: str, dim: int) -> None:
        self.stored = stored
        self.wanted = wanted
        super().__init__(
            f"the index {db_path} was built with model {stored!r} ({stored_dim} dimensions), "
            f"but the configured model is {wanted!r} ({dim} dimensions). Vectors from different "
            f"models cannot be mixed. Either set MODEL_ID back to {stored!r}, point SQLITE_PATH at "
            f"another file, or rebuild this index with `pocketmcp index --rebuild`."
        )


class SchemaTooNewError(StoreError):
    def __init__(self, db_path: Path, found: int, known: int) -> None:
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


class EmbeddingError(PocketError):
    """The embedding model could not be loaded or run."""


class DocumentError(PocketError):
    """One document could not be read or converted; the pipeline skips it and goes on."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def single(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one error inside nested exception groups (anyio's task groups wrap every child's
    failure in one), else the group itself."""
    found: BaseException = group
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    return found
