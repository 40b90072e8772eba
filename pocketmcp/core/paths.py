"""Which paths of the watched folder are documents. Pure: callers pass relative paths."""

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
