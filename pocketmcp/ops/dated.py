"""Dates said in a query, as a filter on the notes' dates (`core.query_dates`).

"what did I decide last week" searches for "what did I decide" among the documents whose
`created` date (a note's front matter `created` or `date`, else its last change) lies in last
week, and the reply's notice says how the phrase was taken. When no document of that span
matches, the search is run again over every date and the notice says so; a caller that gave
date filters of its own keeps them, and the query is then left as it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable

import msgspec

from pocketmcp.core.query_dates import Span, understand
from pocketmcp.ops.filters import Scope
from pocketmcp.ops.floor import joined
from pocketmcp.ops.results import SearchResult
from pocketmcp.store.filters import DocFilter

# (query, scope, strict threshold) -> the search's reply
Run = Callable[[str, Scope | None, bool], Awaitable[SearchResult]]


def today() -> dt.date:
    """The local calendar day: "yesterday" is the user's yesterday."""
    return dt.datetime.now().astimezone().date()


def has_dates(scope: Scope | None) -> bool:
    where = scope.where if scope is not None else DocFilter()
    return any((where.created_after, where.created_before, where.modified_after,
                where.modified_before))


def scoped(span: Span, scope: Scope | None) -> Scope:
    """`scope` narrowed to the documents created within `span`."""
    base = scope or Scope()
    where = msgspec.structs.replace(
        base.where, created_after=span.start.isoformat() if span.start else None,
        created_before=span.end.isoformat() if span.end else None)
    return msgspec.structs.replace(base, where=where)


async def search_dated(run: Run, query: str, scope: Scope | None, *, strict: bool = False,
                       day: dt.date | None = None) -> SearchResult:
    """`run(query, scope, strict)` with the query's date phrase made a filter on the
    documents' dates, and a notice saying what it was taken to mean. When no document of
    that time reaches the threshold, the search runs over every date."""
    span = None if has_dates(scope) else understand(query, day or today())
    if span is None:
        return await run(query, scope, strict)
    said = f"dates: {span.describe()} (the documents' created date)"
    found = await run(span.query, scoped(span, scope), True)
    if found.matches:
        return found.model_copy(update={"notice": joined(said, found.notice)})
    anywhen = await run(query, scope, strict)
    return anywhen.model_copy(update={"notice": joined(
        f"{said}; no document of that time matched, so these are from any date",
        anywhen.notice)})
