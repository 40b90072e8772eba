"""Which paths of the watched folder are documents, and how documents are named in the index.

Pure: callers pass relative paths."""

from __future__ import annotations

from collections.abc import Iterable

from pocketmcp.core.globs import GlobError, GlobSet
from pocketmcp.errors import ConfigError

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
    """Include globs minus ignore patterns, matched on POSIX paths relative to the root in
    time linear in the path (core/globs.py). A line of the folder's .gitignore that cannot
    be read is left out (listed in `skipped`); a bad INCLUDE_GLOBS or IGNORE_PATTERNS entry
    is a ConfigError naming the setting."""

    def __init__(self, include: Iterable[str], ignore: Iterable[str] = (),
                 gitignore: Iterable[str] = ()) -> None:
        self._include = _setting("INCLUDE_GLOBS", include)
        self._ignore = GlobSet([*ALWAYS_IGNORED, *gitignore], skip_bad=True).then(
            _setting("IGNORE_PATTERNS", ignore))
        self.skipped = self._ignore.skipped

    def wants_file(self, rel: str) -> bool:
        return self._include.match(rel) and not self._ignore.match(rel)

    def wants_dir(self, rel: str) -> bool:
        """False for folders whose whole content is ignored (not descended into)."""
        return not self._ignore.match(rel.rstrip("/") + "/")


def _setting(variable: str, patterns: Iterable[str]) -> GlobSet:
    given = list(patterns)
    try:
        return GlobSet(given)
    except GlobError as exc:
        raise ConfigError(variable, ",".join(given), f"gitignore-style patterns ({exc})") from None


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
