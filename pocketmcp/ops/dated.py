"""Dates said in a query, as a filter on the notes' dates (`core.query_dates`).

"what did I decide last week" searches for "what did I decide" among the documents whose
`created` date (a note's front matter `created` or `date`, else its last change) lies in last
week, and the reply's notice says how the phrase was taken. When no document of that span
reaches the threshold, a query that asks about something ("Lisbon trip last week") is run
again over every date, and the notice says so; a query that asks for little more than the
time ("what did I write yesterday": at most one word besides the date and stop words) gets
the span's best documents, under the threshold as the notice says. A caller that gave date
filters of its own keeps them, and the query is then left as it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable

import msgspec

from pocketmcp.core.keywords import terms
from pocketmcp.core.query_dates import Span, understand
from pocketmcp.ops.filters import Scope
from pocketmcp.ops.floor import joined
from pocketmcp.ops.results import SearchResult
from pocketmcp.store.filters import DocFilter

VAGUE_WORDS = 1  # content words besides the date, at most, of a query asking for a time

# (query, scope, strict threshold) -> the search's reply, and whether its matches are all
# under the threshold (the best kept anyway, as its notice says)
Run = Callable[[str, Scope | None, bool], Awaitable[tuple[SearchResult, bool]]]


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
    that time reaches the threshold, the search runs over every date. Two runs at most:
    whether the span's documents reach the threshold is known from its one run."""
    span = None if has_dates(scope) else understand(query, day or today())
    if span is None:
        return (await run(query, scope, strict))[0]
    said = f"dates: {span.describe()} (the documents' created date)"
    found, under = await run(span.query, scoped(span, scope), strict)
    if found.matches and (not under or len(terms(span.query)) <= VAGUE_WORDS):
        # Under the threshold, the span's best documents are kept for a query asking for
        # little more than the time, as the floor's notice says.
        return found.model_copy(update={"notice": joined(said, found.notice)})
    anywhen, _ = await run(query, scope, strict)
    return anywhen.model_copy(update={"notice": joined(
        f"{said}; no document of that time matched, so these are from any date",
        anywhen.notice)})
