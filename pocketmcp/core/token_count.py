"""Exact token counts for BERT-style tokenizers, without the tokenizer's whole pipeline.

Chunking measures every piece of every note in model tokens, and that measuring was the
largest cost of a first scan (about a third of its CPU). The count needs no token ids, no
offsets and no alignments: for a tokenizer made of a BertNormalizer, a BertPreTokenizer and
a WordPiece model, a text's count is the special tokens its post-processor adds plus, for
each of its words, the word's WordPiece count, which depends on the word alone. So the
words are found here (in Python for ASCII text, after the tokenizer's own normalizer for the
rest) and each distinct word is measured once by the WordPiece model and remembered.

The counts are the tokenizer's own, not estimates:
- each character outside ASCII is classified (word, punctuation, space) by the tokenizer's
  own pre-tokenizer the first time it is met;
- a text holding anything this does not model (ASCII control characters, the text of an
  added token such as "[MASK]", a character the pre-tokenizer treats otherwise) is counted
  by the tokenizer itself;
- `FastCounter.of` returns None (count with the tokenizer) for a tokenizer of another kind,
  one with added tokens matched after normalization, or one it does not count exactly as
  the tokenizer does on a set of awkward texts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from tokenizers import Tokenizer

# ASCII: a word is a run of letters and digits; every other printable character is
# punctuation (the pre-tokenizer's `is_ascii_punctuation`), a token of its own; the
# normalizer makes tab, newline and return spaces and drops the other control characters,
# which this path leaves to the tokenizer.
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_WORDS = 400_000  # distinct words remembered; past this, the memory starts again

# Texts the counter must count as the tokenizer does before it is used: accents, case,
# scripts, punctuation of several kinds, joined and combining characters, long words.
_PROBES = (
    "", "a", "Hello, world!", "The 3 cats' toys (mostly) cost $4.50 -- or 4,50 EUR.",
    "naïve café résumé Ångström ŒUVRE straße", "ΣΊΣΥΦΟΣ ὀδυσσεύς", "İstanbul ıi",
    "“quoted” ‘single’ — dash – en … ellipsis • bullet ¶ § © ® ™ ° ± × ÷",
    "中文字符和日本語のテキスト 한국어", "emoji 😀👍🏽 and ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ",
    "zero\u200bwidth\u200djoiner e\u0301 a\u0308", "tab\tnew\nline\r\nnbsp\u00a0thin\u2009",
    "x" * 120, "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "C++ isn't C#; e-mail: a.b@c.io; path/to/file.md#L10; 1e-9 <= x >= 2^8 ~ y|z",
    "Ünïcödé ÀÉÎÕÜ ÿ ß ǅ ﬁ ﬀ ǈ", "٣٤٥ العربية עברית हिन्दी ไทย",
)


class FastCounter:
    """Counts tokens as `tokenizer.encode(text, add_special_tokens=True)` would, for a
    tokenizer with no truncation and no padding."""

    def __init__(self, tokenizer: Tokenizer, *, lowercase: bool, specials: int,
                 added: Sequence[str], longest_word: int) -> None:
        self._tokenizer = tokenizer
        self._normalize = tokenizer.normalizer.normalize_str
        self._pre_tokenize = tokenizer.pre_tokenizer.pre_tokenize_str
        self._word_pieces = tokenizer.model.tokenize
        self._lowercase = lowercase
        self._specials = specials
        # Added tokens are found in the raw text, as they are written (case included).
        self._added = tuple(a for a in added if a)
        self._longest_word = longest_word  # longer words are one unknown token: not kept
        self._words: dict[str, int] = {"": 0}  # each word's WordPiece count
        # Characters met in normalized text: what the pre-tokenizer makes of each.
        self._table: dict[int, str] = {ord(c): f" {c} " for c in map(chr, range(33, 127))
                                       if not c.isalnum()}
        self._known: set[str] = {chr(i) for i in range(32, 127)}
        self._odd: set[str] = set()  # characters whose texts the tokenizer counts itself
        self.fallbacks = 0  # texts counted by the tokenizer itself

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> FastCounter | None:
        """A counter for `tokenizer` (which must have no truncation and no padding), or None
        when it is not of the kind this counts, or does not count as it does."""
        try:
            spec = json.loads(tokenizer.to_str())
        except (ValueError, TypeError):
            return None
        normalizer, pre = spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}
        model = spec.get("model") or {}
        added = spec.get("added_tokens") or ()
        if (normalizer.get("type") != "BertNormalizer" or not normalizer.get("clean_text")
                or pre.get("type") != "BertPreTokenizer" or model.get("type") != "WordPiece"
                or spec.get("truncation") or spec.get("padding")
                or any(t.get("normalized") for t in added)):  # found in normalized text
            return None
        specials = len(tokenizer.encode("", add_special_tokens=True).ids)
        counter = cls(tokenizer, lowercase=bool(normalizer.get("lowercase")), specials=specials,
                      added=[t.get("content", "") for t in added],
                      longest_word=int(model.get("max_input_chars_per_word") or 100))
        texts = list(_PROBES)
        texts += [a + " " + b for a, b in zip(texts, reversed(texts), strict=True)]
        texts += [t.upper() for t in texts] + [t + " [MASK] [cls]" for t in texts[:4]]
        exact = [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=True)]
        if [counter.count(t) for t in texts] != exact:
            return None
        counter._words = {"": 0}  # the probes' words need not stay
        counter.fallbacks = 0
        return counter

    def counts(self, texts: Sequence[str]) -> list[int]:
        """The token count of each text; those this cannot count, in one tokenizer call."""
        out: list[int | None] = [self._fast(t) for t in texts]
        left = [i for i, n in enumerate(out) if n is None]
        if left:
            self.fallbacks += len(left)
            found = self._tokenizer.encode_batch([texts[i] for i in left],
                                                 add_special_tokens=True)
            for i, encoding in zip(left, found, strict=True):
                out[i] = len(encoding.ids)
        return [n for n in out if n is not None]

    def count(self, text: str) -> int:
        return self.counts([text])[0]

    def _fast(self, text: str) -> int | None:
        """The count of `text`, or None when it holds something the tokenizer must see."""
        if any(a in text for a in self._added):
            return None
        if text.isascii():
            if _ASCII_CONTROL.search(text):
                return None
            words: list[str] = _ASCII_WORDS.findall(text.lower() if self._lowercase else text)
        else:
            normalized = self._normalize(text)
            new = set(normalized) - self._known
            if new and not self._learn(new):
                return None
            words = normalized.translate(self._table).split(" ")
        memory = self._words
        try:  # the words summed without a Python loop: most are known already
            return self._specials + sum(map(memory.__getitem__, words))
        except KeyError:
            pass
        known = memory.get
        total = self._specials
        for word in words:
            n = known(word)
            if n is None:
                n = len(self._word_pieces(word))
                if len(word) <= self._longest_word:
                    if len(memory) >= MAX_WORDS:
                        self._words = memory = {"": 0}
                        known = memory.get
                    memory[word] = n
            total += n
        return total

    def _learn(self, chars: set[str]) -> bool:
        """Learn what the pre-tokenizer makes of each of `chars` (in normalized text);
        False when one of them is not a word character, punctuation or a space."""
        for char in chars:
            if char in self._odd:
                return False
            pieces = [p for p, _ in self._pre_tokenize(f"a{char}a")]
            if pieces == [f"a{char}a"]:
                pass  # part of a word
            elif pieces == ["a", char, "a"]:
                self._table[ord(char)] = f" {char} "  # punctuation: a token of its own
            elif pieces == ["a", "a"]:
                self._table[ord(char)] = " "  # a space
            else:
                self._odd.add(char)
                return False
            self._known.add(char)
        return True
