"""Dates said in a search query ("last week", "yesterday", "in March", "since 2024",
"before the 3rd", "this year"), understood as a span of days. Pure functions.

`understand(query, today)` finds at most one date phrase, returns the span it means (a first
day and an end day, exclusive; either may be open) and the query without the phrase, so the
retrievers look for what the query is about. Only phrases that cannot be anything but a date
are taken: a bare number ("the 1984 novel", "error 2024") is left alone; a year needs a word
that makes it a time ("in 2024", "since 2024") and must lie within `YEARS_BACK` years of
today. English, with the simple forms of French, German, Spanish, Italian, Portuguese and
Dutch ("hier", "letzte Woche", "desde 2024").
"""

from __future__ import annotations

import datetime as dt
import re

import msgspec

YEARS_BACK = 30  # a year further back than this is taken as a subject, not a time

_MONTHS = {
    # English, French, German, Spanish, Italian, Portuguese, Dutch (names and short forms)
    1: "january jan janvier januar enero gennaio janeiro januari",
    2: "february feb fevrier février februar febrero febbraio fevereiro februari",
    3: "march mar mars märz maerz marzo março maart",
    4: "april apr avril abril aprile",
    5: "may mai mayo maggio maio mei",
    6: "june jun juin juni junio giugno junho",
    7: "july jul juillet juli julio luglio julho",
    8: "august aug août aout agosto augustus",
    9: "september sep sept septembre settembre septiembre setembro",
    10: "october oct octobre oktober octubre ottobre outubro",
    11: "november nov novembre noviembre novembro",
    12: "december dec décembre decembre dezember diciembre dicembre dezembro",
}
MONTH = {name: n for n, names in _MONTHS.items() for name in names.split()}
# Short month names that are ordinary words too: only with a day or a year after them.
_AMBIGUOUS = {"mar", "jun", "jul", "sep", "sept", "oct", "dec"}

_IN = r"(?:in|during|from|en|im|dans|nel|em)"
_SINCE = r"(?:since|after|depuis|seit|desde|dal|dopo|sinds|na)"
_BEFORE = r"(?:before|until|till|prior\s+to|avant|vor|antes\s+de|prima\s+del|voor)"
_MONTH_NAMES = "|".join(sorted(map(re.escape, MONTH), key=len, reverse=True))
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_ORD = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th|er|\.)?"

# Phrases of a fixed span, by language: (pattern, span name). Articles are left out, so a
# phrase after a preposition that holds one ("del año pasado", "della settimana scorsa",
# "von letzter Woche") reads as the phrase alone; German takes each case's ending.
_DE_THIS = r"diese[nmrs]?"
_DE_LAST = r"(?:letzte|vergangene|vorige)[nmrs]?"
_FIXED: tuple[tuple[str, str], ...] = (
    (r"today|aujourd'hui|heute|hoy|oggi|hoje|vandaag", "today"),
    (r"yesterday|gestern|ayer|ieri|ontem|gisteren", "yesterday"),
    (rf"(?:this|cette|{_DE_THIS}|esta|questa|deze)\s+(?:week|semaine|woche|semana|settimana)",
     "this week"),
    (rf"(?:last|past|previous)\s+week|semaine\s+derni[eè]re|{_DE_LAST}\s+woche|"
     r"semana\s+pasada|settimana\s+scorsa|scorsa\s+settimana|semana\s+passada|"
     r"vorige\s+week|afgelopen\s+week", "last week"),
    (rf"this\s+month|ce\s+mois(?:-ci)?|{_DE_THIS}\s+monats?|este\s+mes|questo\s+mese|"
     r"este\s+m[eê]s|deze\s+maand", "this month"),
    (rf"(?:last|past|previous)\s+month|mois\s+dernier|{_DE_LAST}\s+monats?|"
     r"mes\s+pasado|mese\s+scorso|scorso\s+mese|m[eê]s\s+passado|vorige\s+maand|"
     r"afgelopen\s+maand", "last month"),
    (rf"this\s+year|cette\s+ann[ée]e|{_DE_THIS}\s+jahr(?:es|s)?|este\s+a[ñn]o|"
     r"quest'anno|questo\s+anno|dit\s+jaar", "this year"),
    (rf"(?:last|past|previous)\s+year|ann[ée]e\s+derni[eè]re|an\s+dernier|"
     rf"{_DE_LAST}\s+jahr(?:es|s)?|a[ñn]o\s+pasado|anno\s+scorso|ano\s+passado|"
     r"vorig\s+jaar|afgelopen\s+jaar", "last year"),
)
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "month": 30, "months": 30,
          "year": 365, "years": 365}


class Span(msgspec.Struct, frozen=True):
    """What a query's date phrase was taken to mean: days from `start` (inclusive) to `end`
    (exclusive); None is open."""

    phrase: str
    start: dt.date | None
    end: dt.date | None
    query: str  # the query without the phrase

    def describe(self) -> str:
        if self.start and self.end:
            last = self.end - dt.timedelta(days=1)
            days = (self.start.isoformat() if last == self.start
                    else f"{self.start.isoformat()} to {last.isoformat()}")
        elif self.start:
            days = f"from {self.start.isoformat()} on"
        else:
            assert self.end is not None
            days = f"before {self.end.isoformat()}"
        return f"{self.phrase!r} taken as {days}"


def _month_span(year: int, month: int) -> tuple[dt.date, dt.date]:
    start = dt.date(year, month, 1)
    return start, dt.date(year + month // 12, month % 12 + 1, 1)


def _latest_month(month: int, today: dt.date) -> int:
    """The year of the latest such month that has begun."""
    return today.year if month <= today.month else today.year - 1


def _fixed(name: str, today: dt.date) -> tuple[dt.date, dt.date]:
    day = dt.timedelta(days=1)
    monday = today - dt.timedelta(days=today.weekday())
    month_start = today.replace(day=1)
    previous_month = (month_start - day).replace(day=1)
    spans = {
        "today": (today, today + day),
        "yesterday": (today - day, today),
        "this week": (monday, monday + 7 * day),
        "last week": (monday - 7 * day, monday),
        "this month": _month_span(today.year, today.month),
        "last month": (previous_month, month_start),
        "this year": (dt.date(today.year, 1, 1), dt.date(today.year + 1, 1, 1)),
        "last year": (dt.date(today.year - 1, 1, 1), dt.date(today.year, 1, 1)),
    }
    return spans[name]


def _day_of_month(day: int, today: dt.date) -> dt.date | None:
    """"the 3rd": that day of this month, or of the last one when it is still to come."""
    try:
        found = today.replace(day=day)
    except ValueError:
        return None
    if found > today:
        previous = today.replace(day=1) - dt.timedelta(days=1)
        try:
            found = previous.replace(day=day)
        except ValueError:
            return None
    return found


def _point(text: str, today: dt.date, *, day_alone: bool = True
           ) -> tuple[dt.date, dt.date] | None:
    """The span of a time named after since/before/in: a year, a month (with a year or a
    day), a day of this month ("the 3rd", only with `day_alone`), an ISO date, or a fixed
    phrase."""
    text = text.strip().lower()
    for pattern, name in _FIXED:
        if re.fullmatch(pattern, text):
            return _fixed(name, today)
    if m := re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)", text):
        try:
            day = dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        return day, day + dt.timedelta(days=1)
    if m := re.fullmatch(_YEAR, text):
        year = int(m["year"])
        if not today.year - YEARS_BACK <= year <= today.year + 1:
            return None
        return dt.date(year, 1, 1), dt.date(year + 1, 1, 1)
    if m := re.fullmatch(rf"(?:the\s+)?{_ORD}(?:\s+of\s+(?P<m>[a-zäéûç]+))?", text):
        if m["m"] is None:
            if not (day_alone and text.startswith("the")):
                return None  # "in 3 steps", "in the 2nd round"
            day_found = _day_of_month(int(m["day"]), today)
            return None if day_found is None else (day_found,
                                                   day_found + dt.timedelta(days=1))
        text = f"{m['m']} {m['day']}"
    m = re.fullmatch(rf"(?P<name>{_MONTH_NAMES})\.?(?:\s+{_ORD})?(?:,?\s+{_YEAR})?", text) or \
        re.fullmatch(rf"{_ORD}\s+(?P<name>{_MONTH_NAMES})\.?(?:,?\s+{_YEAR})?", text)
    if not m:
        return None
    month = MONTH[m["name"]]
    if m["name"] in _AMBIGUOUS and not (m["day"] or m["year"]):
        return None
    year = int(m["year"]) if m["year"] else _latest_month(month, today)
    if m["day"]:
        try:
            day = dt.date(year, month, int(m["day"]))
        except ValueError:
            return None
        return day, day + dt.timedelta(days=1)
    return _month_span(year, month)


_TIME = (rf"(?:(?:the\s+)?(?:{_MONTH_NAMES}|[0-3]?\d(?:st|nd|rd|th|er|\.)?)"
         rf"(?:\s+(?:of\s+)?(?:{_MONTH_NAMES}|[0-3]?\d(?:st|nd|rd|th)?))?(?:,?\s+(?:19|20)\d\d)?"
         rf"|(?:19|20)\d\d(?:-\d\d-\d\d)?|{'|'.join(p for p, _ in _FIXED)})")
_ANCHORED = re.compile(rf"\b(?P<kind>{_SINCE}|{_BEFORE}|{_IN}|on)\s+(?P<time>{_TIME})\b",
                       re.IGNORECASE)
_BARE = re.compile(rf"\b(?P<time>{'|'.join(p for p, _ in _FIXED)})\b", re.IGNORECASE)
_LAST_N = re.compile(r"\b(?:in\s+the\s+)?(?:last|past)\s+(?P<n>\d{1,3})\s+"
                     r"(?P<unit>days?|weeks?|months?|years?)\b", re.IGNORECASE)


def understand(query: str, today: dt.date) -> Span | None:
    """The first date phrase of `query` and the span it means; None when there is none."""
    if m := _LAST_N.search(query):
        days = int(m["n"]) * _UNITS[m["unit"].lower()]
        if days:
            start = today - dt.timedelta(days=days - 1)
            return Span(m[0].strip(), start, today + dt.timedelta(days=1), _without(query, m))
    for m in _ANCHORED.finditer(query):
        kind = m["kind"].lower()
        span = _point(m["time"], today, day_alone=not re.fullmatch(_IN, kind))
        if span is None:
            continue
        if re.fullmatch(_SINCE, kind):
            # "since March": from its first day; "after 2024": from the day after it ends.
            start = span[0] if kind in ("since", "depuis", "seit", "desde", "sinds") \
                else span[1]
            return Span(m[0].strip(), start, None, _without(query, m))
        if re.fullmatch(_BEFORE, kind):
            return Span(m[0].strip(), None, span[0], _without(query, m))
        return Span(m[0].strip(), span[0], span[1], _without(query, m))
    if m := _BARE.search(query):
        span = _point(m["time"], today)
        if span is not None:
            return Span(m[0].strip(), span[0], span[1], _without(query, m))
    return None


def _without(query: str, match: re.Match[str]) -> str:
    rest = (query[:match.start()] + " " + query[match.end():]).split()
    return " ".join(rest) or query
