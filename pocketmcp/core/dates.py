"""Dates as the index stores them: UTC ISO 8601 strings that sort as text. Pure functions.

Every date the index holds (a note's front-matter dates, a file's modification time, a PDF's
or Office file's properties) is one of two forms: `2024-03-01T09:30:00.000Z` for a moment, and
`2024-03-01` for a day given without a time. Both sort correctly as text (a day sorts before
every moment of that day), so SQL compares them as strings. Times without a zone are taken as
UTC.
"""

from __future__ import annotations

import datetime as dt
import re

_RELATIVE = re.compile(r"^\s*(\d{1,6})\s*(h|d|w|m|y)\s*$", re.IGNORECASE)
_UNIT_DAYS = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "y": 365}
# PDF dates: D:YYYYMMDDHHmmSSOHH'mm' (every part after the year optional).
_PDF = re.compile(r"^D?:?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?"
                  r"(?:([Zz+\-])(\d{2})?'?(\d{2})?'?)?")


def iso(moment: dt.datetime) -> str:
    """A moment as the index stores it: UTC, milliseconds, `Z`."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    text = moment.astimezone(dt.UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def from_ns(mtime_ns: int) -> str:
    """A file's modification time (nanoseconds since the epoch) as stored."""
    return iso(dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.UTC))


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def normalise(value: object) -> str | None:
    """A date or moment as stored, from what YAML or a document property holds (a date, a
    datetime, or an ISO 8601 string); None when it is not one."""
    if isinstance(value, dt.datetime):
        try:
            return iso(value)
        except (OverflowError, ValueError):  # a moment whose zone takes it past year 1 or 9999
            return None
    if isinstance(value, dt.date):
        return value.isoformat()
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) < 10 or len(text) > 40:
        return None
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text).isoformat()
        return iso(dt.datetime.fromisoformat(text.replace(" ", "T", 1)))
    except (ValueError, OverflowError):
        return None


def pdf_date(value: str) -> str | None:
    """A PDF date string (`D:20240301093000+01'00'`) as stored; None when unreadable."""
    match = _PDF.match(value.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, sign, off_h, off_m = match.groups()
    try:
        moment = dt.datetime(int(year), int(month or 1), int(day or 1), int(hour or 0),
                             int(minute or 0), int(second or 0), tzinfo=dt.UTC)
    except ValueError:
        return None
    if sign in ("+", "-"):
        offset = dt.timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
        moment = moment - offset if sign == "+" else moment + offset
    if hour is None and sign is None:
        return moment.date().isoformat()
    return iso(moment)


def bound(text: str, *, at: dt.datetime | None = None) -> str:
    """A filter's date as stored: an ISO date or moment, or a span back from now (`12h`,
    `7d`, `2w`, `3m` for months of 30 days, `1y`). ValueError names what is accepted."""
    relative = _RELATIVE.match(text)
    if relative:
        days = int(relative.group(1)) * _UNIT_DAYS[relative.group(2).lower()]
        try:
            return iso((at or now()) - dt.timedelta(days=days))
        except (OverflowError, ValueError):
            raise ValueError(f"{text!r} reaches back before the year 1: give a shorter span "
                             "(at most 9000y) or an ISO date") from None
    found = normalise(text)
    if found is None:
        raise ValueError(f"{text!r} is not a date: give an ISO date or time (2024-03-01, "
                         "2024-03-01T09:30:00Z) or a span back from now (12h, 7d, 2w, 3m, 1y)")
    return found
