"""An index's files are its owner's alone: the folders PocketMCP makes for them are 0700 and
the files 0600 (the database and its -wal and -shm, the vector file, the locks, the server's
log, the OCR cache, the search tuning and the token). SQLite makes its -wal and -shm with the
mode of the database file, so the database is made 0600 before SQLite opens it. An index
made before, or by hand, that others can read is found by `exposed` (doctor reports it, and
the writer logs it once on opening)."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def folder(path: Path) -> None:
    """`path` and each missing folder above it, made 0700 (folders that exist are left as
    they are)."""
    missing: list[Path] = []
    at = path
    while not at.exists() and at != at.parent:
        missing.append(at)
        at = at.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=FOLDER_MODE)
        except FileExistsError:  # made meanwhile by another process
            continue
        os.chmod(part, FOLDER_MODE)  # mkdir's mode passes through the umask: set it whole


def file(path: Path) -> None:
    """`path` made empty and 0600 unless it exists, in a folder made by `folder`."""
    folder(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def new_file(path: Path) -> None:
    """`path` made empty and 0600 (truncated when it is there), its folder as it is: a copy
    of the documents' text (an export, a backup) no other user may read. OSError when its
    folder is not there."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE))
    os.chmod(path, FILE_MODE)  # one that was there keeps its mode otherwise


def exposed(paths: list[Path]) -> list[Path]:
    """Those of `paths` (files or folders that exist) that users other than the owner may
    read or enter (POSIX modes; none on Windows, where modes do not say it)."""
    if os.name == "nt":
        return []
    found = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            found.append(path)
    return found


def narrowing(paths: list[Path]) -> str:
    """The command that makes `paths` their owner's alone."""
    files = [shlex.quote(str(p)) for p in paths if not p.is_dir()]
    folders = [shlex.quote(str(p)) for p in paths if p.is_dir()]
    parts = []
    if folders:
        parts.append("chmod 700 " + " ".join(folders))
    if files:
        parts.append("chmod 600 " + " ".join(files))
    return " && ".join(parts)
