"""Filters of search and list_documents, checked and made into the store's DocFilter; and
whether a file still says what was indexed (`stale`).

Every failure names what is accepted: a bad date, an empty tag, a metadata key the store
cannot address.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import msgspec

from pocketmcp.core import dates
from pocketmcp.core.globs import Glob, GlobError
from pocketmcp.core.notes import clean_tag
from pocketmcp.core.paths import path_of
from pocketmcp.core.safe import safe_text
from pocketmcp.errors import InvalidPattern, InvalidRequest, LimitExceeded
from pocketmcp.search import deadline
from pocketmcp.search.results import Range, SearchFilter
from pocketmcp.store.api import Listing
from pocketmcp.store.filters import Compare, DocFilter, Op

MAX_VALUES = 100  # tags or values of one `in` condition
MAX_CONDITIONS = 64  # metadata keys of one filter
MAX_KEY = 200  # characters of a metadata key
MAX_TEXT = 2_000  # characters of a metadata value
INT64 = (-(2**63), 2**63 - 1)
MAX_ID = 2**63 - 1  # SQLite's largest rowid


def check_ids(ids: Sequence[int], what: str = "doc_ids") -> list[int]:
    """Ids as SQLite can hold them: whole numbers from 1 to 2**63 - 1."""
    for value in ids:
        if not 1 <= value <= MAX_ID:
            raise InvalidRequest(f"{what} holds {value}, which is no id: ids are whole numbers "
                                 f"from 1 to {MAX_ID}")
    return list(ids)


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """Which documents a search or listing may return: conditions the store runs, and a
    path glob matched here (gitignore syntax)."""

    where: DocFilter = DocFilter()
    path_glob: str | None = None

    @classmethod
    def of(cls, flt: SearchFilter | None, library: str | None = None,
           metadata: Mapping[str, Any] | None = None) -> Scope | None:
        """The scope of a tool's `filter`, `library` (and list_documents' `metadata`)
        arguments; None when nothing is limited."""
        flt = flt or SearchFilter.model_validate({})
        conditions = [*metadata_conditions(metadata), *metadata_conditions(flt.metadata)]
        where = DocFilter(
            doc_ids=tuple(check_ids(flt.doc_ids)) if flt.doc_ids is not None else None,
            library=library, tags_any=_tags(flt.tags, "tags"),
            tags_all=_tags(flt.tags_all, "tags_all"),
            modified_after=_date(flt.modified_after, "modified_after"),
            modified_before=_date(flt.modified_before, "modified_before"),
            created_after=_date(flt.created_after, "created_after"),
            created_before=_date(flt.created_before, "created_before"),
            metadata=tuple(conditions))
        glob = flt.path_glob or None
        if glob is not None:
            compile_glob(glob)  # refused now, before any search runs
        if where.empty() and glob is None:
            return None
        return cls(where=where, path_glob=glob)

    def doc_ids(self, reader: Listing) -> list[int] | None:
        """The documents in scope, by doc_id (blocking); None when every one is."""
        allowed = None if self.where.empty() else reader.doc_ids_where(self.where)
        if self.path_glob:
            matching = glob_doc_ids(reader, self.path_glob, deadline.check)
            allowed = matching if allowed is None else sorted(set(allowed) & set(matching))
        return allowed


def compile_glob(glob: str) -> Glob:
    """A path_glob, compiled for linear-time matching; INVALID_PATTERN says what is wrong."""
    try:
        return Glob(glob)
    except GlobError as exc:
        raise InvalidPattern(f"path_glob {safe_text(glob[:80])!r}: {exc}. A path_glob is a "
                             "gitignore-style pattern such as notes/**/*.md") from None


def glob_doc_ids(reader: Listing, glob: str, check: Callable[[], None] = lambda: None
                 ) -> list[int]:
    """Documents whose path (files) or external id (others) matches a gitignore-style glob,
    in time linear in each path (core/globs.py). `check` runs every 100 documents (a
    search's deadline)."""
    spec = compile_glob(glob)
    out = []
    for n, (doc_id, ext) in enumerate(reader.all_external_ids()):
        if n % 100 == 99:
            check()
        name = (path_of(ext, "file") if ext.startswith(("file:", "path:")) else None) or ext
        if spec.match(name):
            out.append(doc_id)
    return out


def _date(text: str | None, name: str) -> str | None:
    if text is None or not text.strip():
        return None
    try:
        return dates.bound(text)
    except ValueError as exc:
        raise InvalidRequest(f"{name}: {safe_text(str(exc))}") from None


def _tags(tags: list[str] | None, name: str) -> tuple[str, ...]:
    if not tags:
        return ()
    if len(tags) > MAX_VALUES:
        raise InvalidRequest(f"{name} holds more than {MAX_VALUES} tags")
    out = []
    for tag in tags:
        clean = clean_tag(tag)
        if clean is None:
            raise InvalidRequest(f"{name} holds {safe_text(tag)!r}, which is no tag: tags are "
                                 "letters, digits, _, - and / (not only digits), with or "
                                 "without the leading #")
        out.append(clean)
    return tuple(out)


def _key(key: str) -> str:
    if len(key) > MAX_KEY:
        raise LimitExceeded(f"metadata filter key {safe_text(key[:40])!r}... is {len(key)} "
                            f"characters long; keys have at most {MAX_KEY}")
    if not key or '"' in key or "\\" in key:
        raise InvalidRequest(f"metadata filter key {safe_text(key)!r} is not usable: it must "
                             "be non-empty and hold no quotes or backslashes")
    return key


def _scalar(value: Any, key: str) -> str | int | float | bool:
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise LimitExceeded(f"metadata filter {safe_text(key)!r}: a value of "
                                f"{len(value)} characters; at most {MAX_TEXT}")
        return safe_text(value)
    if isinstance(value, bool | int | float):
        return _number(value, key)
    raise InvalidRequest(f"metadata filter {safe_text(key)!r} must be a string, number or "
                         "boolean, a list of them, or a range {gt, gte, lt, lte}")


def _number(value: float | bool, key: str) -> float | bool:
    """A number an index compares: integers within 64 bits, floats finite."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise InvalidRequest(f"metadata filter {safe_text(key)!r}: {value} is beyond the "
                             "64-bit integers an index holds (-2^63 to 2^63-1); give a smaller "
                             "number")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(f"metadata filter {safe_text(key)!r}: {value} is not a finite "
                             "number")
    return value


def _bound(value: float | str, key: str) -> float | str:
    """A range's bound: numbers as given, dates (and spans back from now) as stored, other
    text as given."""
    if isinstance(value, str):
        try:
            return dates.bound(value)
        except ValueError:
            return safe_text(value)
    if isinstance(value, bool):
        raise InvalidRequest(f"metadata filter {safe_text(key)!r}: a range takes numbers or "
                             "dates, not booleans")
    return _number(value, key)


def metadata_conditions(metadata: Mapping[str, Any] | None) -> list[Compare]:
    """Conditions of a `metadata` filter: a value (equality), a list (any of them) or a
    range."""
    out: list[Compare] = []
    if metadata and len(metadata) > MAX_CONDITIONS:
        raise LimitExceeded(f"the metadata filter has {len(metadata)} keys; at most "
                            f"{MAX_CONDITIONS}: filter on fewer fields")
    for key, value in (metadata or {}).items():
        key = _key(key)
        if isinstance(value, Range | dict):
            found = value if isinstance(value, Range) else _range(value, key)
            given = found.model_dump(exclude_none=True)
            if not given:
                raise InvalidRequest(f"metadata filter {safe_text(key)!r} is an empty range: "
                                     "give gt, gte, lt, lte or exists")
            for op, bound in given.items():
                out.append(Compare(key, "exists", bool(bound)) if op == "exists" else
                           Compare(key, cast(Op, op), _bound(bound, key)))
        elif isinstance(value, list):
            if not value or len(value) > MAX_VALUES:
                raise InvalidRequest(f"metadata filter {safe_text(key)!r} needs 1 to "
                                     f"{MAX_VALUES} values")
            out.append(Compare(key, "in", tuple(_scalar(v, key) for v in value)))
        else:
            out.append(Compare(key, "eq", _scalar(value, key)))
    return out


def _range(value: dict[str, Any], key: str) -> Range:
    try:
        return Range.model_validate(value, strict=False)
    except ValueError:
        raise InvalidRequest(f"metadata filter {safe_text(key)!r}: a range is an object of "
                             "gt, gte, lt, lte (numbers or dates) and exists") from None


def is_stale(root: Path | None, external_id: str, source: str, size: int | None,
             mtime_ns: int | None) -> bool | None:
    """Whether the file behind a document differs from what was indexed, by its size and
    modification time (a stat; blocking). None when it is no file, or nothing was recorded
    to compare with."""
    try:
        path = path_of(external_id, source)
    except IndexError:  # `path:` without its parts: no file to compare with
        return None
    if path is None or size is None or mtime_ns is None:
        return None
    if external_id.startswith("file:"):
        if root is None:
            return None
        full = root / path
    else:
        full = Path(path)
    try:
        st = os.stat(full)
    except (OSError, ValueError):  # ValueError: a NUL in a path written by an old import
        return True  # gone (or unreadable) since it was indexed
    return (st.st_size, st.st_mtime_ns) != (size, mtime_ns)
