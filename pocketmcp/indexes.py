"""Where an index lives: one per folder, in the user's data folder (as `platformdirs` gives it
on Linux, macOS and Windows), named from the folder: `indexes/NAME-HASH/index.db`, NAME the
folder's own name made safe for a file name, HASH the start of the SHA-256 of its absolute
path. The index's token, discovery file, vector file and named databases are beside it.

Every command and every client entry `pocketmcp init` writes use this rule; SQLITE_PATH (or
`--db`) names another file instead. Commands that read an index without being told which
(`search`, `doctor`, `serve`, `open`, ...) take the one of the current directory (or of a
folder above it), else the only index of a folder inside it, else the only index of a
folder there is.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pocketmcp.errors import StoreError
from pocketmcp.store.home import data_dir
from pocketmcp.store.places import at_file

if TYPE_CHECKING:
    from pocketmcp.store.api import Place

INDEX_FILE = "index.db"


def indexes_dir() -> Path:
    return data_dir() / "indexes"


def _absolute(folder: Path) -> Path:
    return Path(os.path.expanduser(folder)).resolve()


def index_for(folder: Path) -> Path:
    """The index of `folder` by the rule (nothing is created)."""
    folder = _absolute(folder)
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-.")[:40] or "root"
    digest = hashlib.sha256(str(folder).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return indexes_dir() / f"{name}-{digest}" / INDEX_FILE


def known() -> list[Path]:
    """The indexes kept by the rule, by name."""
    base = indexes_dir()
    if not base.is_dir():
        return []
    return sorted(path for path in base.glob(f"*/{INDEX_FILE}") if path.is_file())


def recorded_folder(place: Place) -> Path | None:
    """The folder the index at `place` records it indexes (None: none, or unreadable: the
    command that opens the index says why)."""
    try:
        record = place.folder()
    except StoreError:
        return None
    return None if record is None else record.root


# The indexes a search for one looked at, each with the folder it records.
Seen = list[tuple[Path, Path | None]]


class Found:
    """An index picked for a command, with the folder it indexes."""

    def __init__(self, index: Path, folder: Path) -> None:
        self.index = index
        self.folder = folder


def pick(cwd: Path) -> tuple[Found | None, Seen]:
    """The index a command run in `cwd` means when told none: the index of `cwd` or of a
    folder above it, else of `cwd/kb`, else the only one of a folder inside `cwd`, else the
    only index of a folder there is. With it (or None) the indexes looked at, each with its
    folder."""
    cwd = _absolute(cwd)
    for folder in (cwd, *cwd.parents):
        index = index_for(folder)
        if index.is_file():
            return Found(index, folder), []
    kb = cwd / "kb"
    if kb.is_dir() and index_for(kb).is_file():
        return Found(index_for(kb), kb), []
    every = [(index, recorded_folder(at_file(index))) for index in known()]
    # Indexes of folders: one a server made without a folder (fed by its tools alone) is
    # taken only when named.
    folders = [(i, f) for i, f in every if f is not None]
    inside = [(i, f) for i, f in folders if f.is_relative_to(cwd)]
    if len(inside) == 1:
        return Found(*inside[0]), every
    if len(folders) == 1:
        return Found(*folders[0]), every
    return None, every
