"""Turning a free-text query into an FTS5 query. Pure (the stemmer is a pure library)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

import snowballstemmer

from pocketmcp.core import cjk

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
MAX_PHRASE = 4  # CJK characters searched as one phrase; longer runs by their bigrams
MAX_QUERY_TERMS = 12  # rarest words kept for the FTS5 query
COMMON_SHARE = 0.1  # words in more than this share of the chunks are dropped...
# ...but never a word in this many chunks or fewer: in a folder of a few thousand chunks the
# words that name its topics ("environment", "build" in a tool's docs) are in more than a
# tenth of them, and dropping them lost the right page (the Hatch documentation: hybrid
# nDCG@10 0.722 with 50, 0.741 with 2000, docs/search.md). From 20,000 chunks on the share
# decides, as before.
COMMON_FLOOR = 2000
# Chunks an OR-query may have to score, summed over its words, so the time grows with this
# (about 0.25 us an occurrence scored in numpy, sqlite/keywords/bm25.py; 0.75 us a row in FTS5's
# bm25()). At 1M chunks 20,000 against 30,000: 0.70 of FTS5's time, and the full query's top
# 10 kept in 59 queries of 100 against 60; at 50k it never binds for these queries
# (docs/studies.md).
POSTINGS_BUDGET = 20_000


def terms(query: str) -> list[str]:
    """Distinct content words of `query`, in order, lower-cased.

    A CJK run that looks like one word (`cjk.is_one_word`) is one term, which `fts_query`
    searches for as the phrase of its bigrams; a lone hiragana, a particle, is dropped like a
    one-letter word. A longer run of kanji and kana is most likely several words typed without
    spaces, as such queries usually are ("東京の天気予報"): each of its bigrams is a term of
    its own, so documents holding more of its rarer bigrams rank higher, verbatim or not.
    """
    words = _WORD.findall(query.lower())
    if cjk.has_cjk(query):
        words = [part for word in words for piece, is_cjk in cjk.split(word)
                 if not (is_cjk and cjk.is_particle(piece))
                 for part in (cjk.bigrams(piece) if is_cjk and not cjk.is_one_word(
                     piece, MAX_PHRASE) else [piece])]
    out: list[str] = []
    for word in words:
        word = word.strip("_")
        if not word or word in STOPWORDS or (len(word) == 1 and not word.isdigit()
                                             and not cjk.has_cjk(word)):
            continue
        if word not in out:
            out.append(word)
    return out[:MAX_TERMS]


def stems(words: list[str]) -> list[str]:
    """Porter stems, as FTS5's porter tokenizer makes them (nearly always the same)."""
    return [str(s) for s in _stemmer().stemWords(words)]


@cache
def _stemmer() -> Any:
    return snowballstemmer.stemmer("porter")


def vocab_terms(words: list[str]) -> list[str]:
    """The index terms whose document frequencies `fts_query` needs for `words`: the stem of
    a word, the bigrams of a CJK run, and "x*" (all terms starting with x) for a lone CJK x."""
    return [term for keys in _keys(words) for term in keys]


def _keys(words: list[str]) -> list[list[str]]:
    if not cjk.has_cjk(" ".join(words)):
        return [[stem] for stem in stems(words)]
    stemmed = iter(stems([w for w in words if not cjk.has_cjk(w)]))
    return [(cjk.bigrams(w) if len(w) > 1 else [w + "*"]) if cjk.has_cjk(w) else [next(stemmed)]
            for w in words]


def _match_term(word: str) -> str:
    if not cjk.has_cjk(word):
        return '"' + word.replace('"', '""') + '"'
    # A run is the phrase of its bigrams; a lone character any term it starts (it is the
    # first of a bigram, or a one-character run).
    return '"' + " ".join(cjk.bigrams(word)) + '"' + (" *" if len(word) == 1 else "")


def fts_query(query: str, df: Mapping[str, int] | None = None, total: int = 0,
              common: float = COMMON_SHARE, most: int = MAX_QUERY_TERMS,
              budget: int = POSTINGS_BUDGET) -> str | None:
    """An FTS5 MATCH expression: any of the query's content words. None when it has none.

    With `df` (chunks holding each term of `vocab_terms`) and `total` (chunks in all), the
    rarest words are kept first: at most `most`, none in more than `common` of the chunks
    (and more than COMMON_FLOOR: in a small index every word is in a large share of it),
    and no more than `budget` postings in all (the rarest word always). Common words add
    almost nothing to BM25, yet an OR-query has to score every chunk that holds any of them.
    A CJK phrase counts as one word, in as many chunks as its rarest bigram (at most).
    """
    kept = query_words(query, df, total, common=common, most=most, budget=budget)
    return match_of(kept) if kept else None


def query_words(query: str, df: Mapping[str, int] | None = None, total: int = 0, *,
                common: float = COMMON_SHARE, most: int = MAX_QUERY_TERMS,
                budget: int = POSTINGS_BUDGET) -> list[tuple[str, int]]:
    """The words `fts_query` searches for, each with the chunks holding it (0 without `df`)."""
    words = terms(query)
    if not words:
        return []
    if df is None or total <= 0:
        return [(w, 0) for w in words]
    counts = [min(df.get(key, 0) for key in keys) for keys in _keys(words)]
    ranked = sorted(range(len(words)), key=lambda i: counts[i])
    keep = ranked[:1]
    spent = counts[ranked[0]]
    for i in ranked[1:most]:
        if counts[i] > max(common * total, COMMON_FLOOR) or spent + counts[i] > budget:
            break
        keep.append(i)
        spent += counts[i]
    return [(words[i], counts[i]) for i in sorted(keep)]


def match_of(words: list[tuple[str, int]]) -> str:
    """The FTS5 MATCH expression for words of `query_words`: any of them."""
    return " OR ".join(_match_term(w) for w, _ in words)


def reference_bm25(counts: list[int], total: int) -> float:
    """The BM25 that FTS5 gives a text of average length holding each word once: the sum of
    the words' idf (FTS5's formula, at least 1e-6 each). A keyword score divided by it is
    comparable across queries and indexes. A count above `total` (a prefix's, summed over the
    terms it starts) counts as `total`."""
    return sum(max(1e-6, math.log((max(total, n) - n + 0.5) / (n + 0.5)))
               for n in counts) or 1.0
