"""What an index records of the folder it indexes: the folder itself (absolute) and how its
documents fall into libraries, so that every process reading the index (a search from another
directory, a server started without WATCH_DIR) resolves stale marks, file links and paths
against it. Kept as one meta row, `folder`, in either store."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import msgspec

FOLDER_KEY = "folder"  # meta key: this record, as JSON
# meta key: how far the writer has come with its first scan of the folder ("running", then
# "done"), so read-only processes report readiness as it does. An index that never recorded
# it (made before this key) counts as scanned.
SCAN_KEY = "first_scan"


class FolderRecord(msgspec.Struct, frozen=True, kw_only=True):
    path: str  # the indexed folder, absolute
    library_from: str = "folder"  # how LIBRARY put files in libraries when it was indexed
    default_library: str = "default"
    host: str = ""  # the machine it was indexed on ("": not recorded, an older index)

    def other_than(self, folder: Path) -> bool:
        """Whether `folder` (resolved) is another folder than this one that still exists on
        this machine: indexing it into this index would remove this one's documents. A
        folder indexed on another machine (a team's index) or no longer there (moved) is
        not told apart."""
        if self.host != socket.gethostname() or not os.path.isdir(self.path):
            return False
        try:  # one folder by two names (a case-insensitive disk, a link) is the same one
            return not os.path.samefile(self.path, folder)
        except OSError:  # `folder` is not there (yet)
            return Path(self.path) != folder

    @property
    def root(self) -> Path:
        return Path(self.path)

    def encode(self) -> str:
        return msgspec.json.encode(self).decode()

    @classmethod
    def decode(cls, text: str | None) -> FolderRecord | None:
        """The record kept in the meta row; None when there is none (an index made before
        the folder was recorded, or one fed by tools alone) or it cannot be read."""
        if not text:
            return None
        try:
            return msgspec.json.decode(text, type=cls)
        except msgspec.DecodeError:
            return None
