"""The files of a SQLite index beside its own: named after it, by suffix."""

from __future__ import annotations

from pathlib import Path

VECTORS = ".vectors"  # the vector file (vectors/file.py)
WRITER_LOCK = ".writer.lock"  # held by the one process that writes the index
BESIDE = ("-wal", "-shm", VECTORS, WRITER_LOCK)  # what the index is made of besides its file


def beside(db_path: Path, suffix: str) -> Path:
    return db_path.with_name(db_path.name + suffix)


def lock_path(db_path: Path) -> Path:
    """The writer lock of the index at `db_path`."""
    return beside(db_path, WRITER_LOCK)
