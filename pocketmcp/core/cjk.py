"""Chinese, Japanese and Korean text as overlapping character bigrams, for FTS5. Pure.

FTS5's unicode61 tokenizer keeps a whole run of CJK characters as one token, since these
scripts put no spaces between words: "東京都に行きました" is a single token, and a query for
東京 never matches it. As Lucene's CJKAnalyzer does, each run is indexed as its overlapping
bigrams instead ("東京 京都 都に に行 ..."), and a query run becomes the phrase of its bigrams,
which matches wherever the run occurs in a text. Most Japanese and Chinese words are two
characters long, which a trigram tokenizer could not find.

A run is not split where the script changes (kanji to hiragana): words with okurigana
(使い方, 食べる) span both scripts, and a split would leave them unsearchable except by their
single characters.

Known limitations: bigrams know nothing of word boundaries, so 京都 also matches 東京都
("Tokyo Metropolis" holds the bigram 京都), as it does in any bigram index. A query run is
searched by its bigrams when it is longer than a word or two (see `keywords.terms`).
A lone character is searched as a prefix, so it is found where it starts a bigram (猫が) but
not where it ends one (黒猫). Halfwidth and fullwidth forms are not unified.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# The characters that make up a run, as (first, last) code points, both included.
HAN = (
    (0x3005, 0x3007),  # 々 〆 〇: iteration mark, closing mark, ideographic zero
    (0x303B, 0x303B),  # 〻 vertical iteration mark
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2FA1F),  # Extensions B-F and the Compatibility Supplement
    (0x30000, 0x323AF),  # Extensions G-H
)
HIRAGANA = (
    (0x3041, 0x3096),  # ぁ..ゖ (not the combining or spacing voiced marks 3099-309C)
    (0x309D, 0x309F),  # ゝ ゞ ゟ
)
KATAKANA = (
    (0x30A1, 0x30FA),  # ァ..ヺ (not ゠ 30A0, nor the middle dot ・ 30FB: word separators)
    (0x30FC, 0x30FF),  # ー (prolonged sound mark) ヽ ヾ ヿ
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions (small ㇰ..ㇿ)
    (0xFF66, 0xFF9F),  # halfwidth ｦ..ﾟ, with ｰ (FF70) and the voiced marks ﾞ ﾟ
)
HANGUL = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3131, 0x318E),  # Hangul Compatibility Jamo
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7A3),  # Hangul Syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo Extended-B
)
RANGES = HAN + HIRAGANA + KATAKANA + HANGUL


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


_RUN = re.compile(f"[{_char_class(RANGES)}]+")
_PARTICLE = re.compile(f"[{_char_class(HIRAGANA)}\u30fc]")  # a lone kana: の, は, を ...


def has_cjk(text: str) -> bool:
    """Whether `text` holds any character of a CJK run."""
    return not text.isascii() and _RUN.search(text) is not None


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a run; a one-character run is itself."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]


def index_text(text: str) -> str:
    """`text` with every CJK run rewritten as its bigrams, separated by spaces.

    Text without CJK comes back as it is (the very same string). A run is also set apart
    from letters it touches ("Pythonの" -> "Python の"), which unicode61 would join.
    """
    if text.isascii() or _RUN.search(text) is None:  # isascii: one pass, no scan
        return text
    out: list[str] = []
    pos = 0
    for m in _RUN.finditer(text):
        start, end = m.span()
        out.append(text[pos:start])
        if start > 0 and not text[start - 1].isspace():
            out.append(" ")
        out.append(" ".join(bigrams(m.group())))
        if end < len(text) and not text[end].isspace():
            out.append(" ")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def split(text: str) -> Iterator[tuple[str, bool]]:
    """`text` cut into its CJK runs and the pieces between: (piece, is_cjk), in order."""
    pos = 0
    for m in _RUN.finditer(text):
        if m.start() > pos:
            yield text[pos:m.start()], False
        yield m.group(), True
        pos = m.end()
    if pos < len(text):
        yield text[pos:], False


_ONE_WORD_SCRIPTS = re.compile(f"[{_char_class(KATAKANA)}]+|[{_char_class(HANGUL)}]+")


def is_one_word(run: str, longest: int) -> bool:
    """Whether a query run is likely one word or compound, searched as a phrase: at most
    `longest` characters, or all katakana (loanwords: コンピュータ) or all Hangul (Korean
    puts spaces between words). Longer runs of kanji and kana are usually several words."""
    return len(run) <= longest or _ONE_WORD_SCRIPTS.fullmatch(run) is not None


def is_particle(run: str) -> bool:
    """A lone hiragana (or ー): a grammatical particle, too common to search for alone."""
    return len(run) == 1 and _PARTICLE.match(run) is not None
