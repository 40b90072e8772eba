"""Turning a free-text query into an FTS5 query. Pure."""

from __future__ import annotations

import re

# Common English words: they match most chunks, add little, and make OR-queries slow.
_STOPWORD_TEXT = """
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can cannot could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in into is
it its itself just let me more most my myself no nor not of off on once only or other ought
our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
also may might must shall via vs versus etc whether within without among upon per
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_TERMS = 32


def terms(query: str) -> list[str]:
    """Distinct content words of `query`, in order, lower-cased."""
    out: list[str] = []
    for word in _WORD.findall(query.lower()):
        word = word.strip("_")
        if not word or word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        if word not in out:
            out.append(word)
    return out[:MAX_TERMS]


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression: any of the query's content words. None when it has none."""
    words = terms(query)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
