"""Connections to a Postgres index: a schema on the search path, statement timeouts, the
vector type registered, and psycopg's errors told apart (worth a retry, or not)."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pgerrors
from psycopg import sql

from pocketmcp.errors import StoreError
from pocketmcp.store.pg.target import PgTarget

STATEMENT_TIMEOUT_MS = 30_000  # one statement; a stuck query fails instead of hanging a tool
LOCK_TIMEOUT_MS = 20_000  # waiting for another writer's lock on a document
IDLE_IN_TRANSACTION_MS = 60_000  # a writer that went away mid-transaction frees its locks


def options(place: PgTarget) -> str:
    """libpq `options`: the index's schema first, `public` (where pgvector lives) after."""
    # Quoted: a named database's schema keeps its case and may hold '-' (place.py).
    return (f'-c search_path="{place.schema}",public '
            f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout={LOCK_TIMEOUT_MS} "
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}")


def configure(conn: psycopg.Connection[Any]) -> None:
    """Register pgvector's types (once the extension exists)."""
    register_vector(conn)


def connect(place: PgTarget, *, autocommit: bool) -> psycopg.Connection[Any]:
    """One connection; StoreError (never the URL) when the server cannot be reached."""
    try:
        conn = psycopg.connect(place.url.reveal(), autocommit=autocommit,
                               options=options(place), connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to the Postgres server of {place.describe()}: "
                         f"{_clean(exc, place)}") from None
    return conn


def ensure_extension(conn: psycopg.Connection[Any]) -> None:
    """pgvector in `public`, created when missing (needs the right to; a managed server may
    have it created by its administrator)."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    try:
        with contextlib.suppress(pgerrors.UniqueViolation):  # made meanwhile by another one
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    except pgerrors.InsufficientPrivilege as exc:
        raise StoreError(
            f"{str(exc).strip().splitlines()[0]}: pgvector is not installed in this database "
            "and this user may not install it; ask its administrator to run `CREATE "
            "EXTENSION vector;` in it (pgvector 0.8 or newer), then run this again") from None


def schema_ident(place: PgTarget) -> sql.Identifier:
    return sql.Identifier(place.schema)


def is_transient(exc: BaseException) -> bool:
    """Whether running the transaction again may succeed: a serialization failure, a
    deadlock, a lock wait that timed out, or a connection that dropped."""
    if isinstance(exc, pgerrors.SerializationFailure | pgerrors.DeadlockDetected
                  | pgerrors.LockNotAvailable):
        return True
    state = getattr(exc, "sqlstate", None)
    if state is None:  # no answer from the server: the connection itself failed
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in ("57P01", "57P02", "57P03")  # shut down


def _clean(exc: BaseException, place: PgTarget) -> str:
    """An error's text without the URL's password, if the driver quoted it."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    secret = place.url.reveal()
    return text.replace(secret, "***")


def store_error(exc: BaseException, place: PgTarget) -> StoreError:
    return StoreError(f"{place.describe()}: {_clean(exc, place)}")
