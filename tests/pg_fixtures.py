"""Fixtures for tests against Postgres: one real server per session, a schema per test."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import MISSING, backend, local_postgres, new_schema


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of a PostgreSQL 18 + pgvector server started for this session (skipped, with
    the reason, only when the server wheel is not installed; under CI=true that fails)."""
    if backend() is None:
        if os.environ.get("CI") == "true":  # CI installs it: the tests must run there
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    with local_postgres(Path(tempfile.mkdtemp(prefix="pg-"))) as url:
        yield url


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema of this test's own, dropped after it with every schema named after it
    (`<name>_...`: its named databases, and other indexes a test makes beside it)."""
    import psycopg  # an optional dependency, installed for the tests

    name = new_schema()
    yield name
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schemas = [r[0] for r in conn.execute(
            b"SELECT nspname FROM pg_namespace WHERE nspname = %s OR left(nspname, %s) = %s",
            (name, len(name) + 1, name + "_")).fetchall()]
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
