"""The PocketError tree. Messages are built from structured arguments."""

from __future__ import annotations

from pathlib import Path


class PocketError(Exception):
    """Base of every error PocketMCP raises on purpose.

    `code` starts the message of the tool error a client sees, e.g. "NOT_FOUND: ...".
    """

    code = "ERROR"


class InvalidRequest(PocketError):
    """The request's arguments cannot be served as given."""

    code = "INVALID_REQUEST"


class NotFound(PocketError):
    """What the request names does not exist."""

    code = "NOT_FOUND"


class UnsupportedFormat(InvalidRequest):
    """No converter reads files of this kind."""

    code = "UNSUPPORTED_FORMAT"


class ConfigError(PocketError):
    def __init__(self, variable: str, value: object, accepts: str) -> None:
        self.variable = variable
        self.value = value
        self.accepts = accepts
        super().__init__(f"{variable}={value!r} is not valid: {variable} accepts {accepts}")


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
