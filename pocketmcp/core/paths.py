"""Which paths of the watched folder are documents, and how documents are named in the index.

Pure: callers pass relative paths."""

from __future__ import annotations

from collections.abc import Iterable

import pathspec

# Temp and editor files, and everything hidden. Gitignore syntax.
ALWAYS_IGNORED = (
    ".*",            # dot files and dot folders (.git, .obsidian, .DS_Store, .#lock files)
    "~$*",           # Office lock files
    "*~",            # backup files
    "*.tmp",
    "*.temp",
    "*.swp",
    "*.swo",
    "*.swx",
    "*.part",
    "*.crdownload",
    "4913",          # vim's write probe
    "__pycache__/",
    "node_modules/",
)


class PathFilter:
    """Include globs minus ignore patterns, matched on POSIX paths relative to the root."""

    def __init__(self, include: Iterable[str], ignore: Iterable[str] = (),
                 gitignore: Iterable[str] = ()) -> None:
        self._include = pathspec.PathSpec.from_lines("gitignore", list(include))
        self._ignore = pathspec.GitIgnoreSpec.from_lines(
            [*ALWAYS_IGNORED, *gitignore, *ignore]
        )

    def wants_file(self, rel: str) -> bool:
        return self._include.match_file(rel) and not self._ignore.match_file(rel)

    def wants_dir(self, rel: str) -> bool:
        """False for folders whose whole content is ignored (not descended into)."""
        return not self._ignore.match_file(rel.rstrip("/") + "/")


# -- the identity of a document in the index ---------------------------------------------------

def watched_id(rel: str) -> str:
    """The external id of the watched file at `rel` (POSIX, relative to the watched folder)."""
    return "file:" + rel


def rel_of(external_id: str) -> str:
    """The watched file's relative path in its external id."""
    return external_id.removeprefix("file:")


def path_of(external_id: str, source: str) -> str | None:
    """A file's path: relative for watched files, absolute for ingested ones (`path:LIB:PATH`);
    None for documents that are not files."""
    if source != "file":
        return None
    if external_id.startswith("path:"):
        return external_id.split(":", 2)[2]
    return rel_of(external_id)
