"""A page-for-page copy of a SQLite index made with SQLite's backup API, through a
read-only connection, so it runs while the writer writes and sees one committed state from
start to end. (An export reads every document as every store does: store/reads.py.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pocketmcp import private
from pocketmcp.errors import StoreError
from pocketmcp.store.sqlite.connect import open_sync_reader, sqlite_errors, sqlite_module


def backup(source: Path, target: Path) -> int:
    """Copy the index at `source` to `target` with SQLite's backup API, from a read-only
    connection: a consistent copy even while its writer writes (blocking). The copy is
    written beside `target` and renamed over it when complete. Returns its size in bytes."""
    partial = target.with_name(target.name + ".partial")
    src = open_sync_reader(source)
    try:
        partial.unlink(missing_ok=True)
        private.new_file(partial)  # 0600, as the index's own files
        dst: Any = sqlite_module().connect(str(partial))
        try:
            src.backup(dst)  # one step: one read transaction, so one committed state
            problem = dst.execute("PRAGMA quick_check").fetchone()[0]
            if problem != "ok":
                raise StoreError(f"the copy of {source} failed its check: {problem}")
        finally:
            dst.close()
        os.replace(partial, target)
    except sqlite_errors() as exc:
        raise StoreError(f"cannot back up {source} to {target}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc}") from exc
    finally:
        src.close()
        partial.unlink(missing_ok=True)
    return target.stat().st_size
