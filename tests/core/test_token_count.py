"""Token counts without the tokenizer's whole pipeline are the tokenizer's own counts: on
ordinary notes (counted without it), on texts of many scripts, marks and control characters
(some of which it must count itself), and a tokenizer of another kind is left to count
alone."""

from __future__ import annotations

import random

import pytest
from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers

from pocketmcp.core.chunking import Chunker, _counting_copy
from pocketmcp.core.token_count import FastCounter
from pocketmcp.embed.models import bundled_tokenizer

# Code points drawn from: ASCII, Latin with accents, Greek, combining marks, CJK, kana,
# general punctuation, emoji, fullwidth forms, Arabic, Devanagari, control characters,
# variation selectors, Hangul, private use, and beyond the basic plane.
POOLS = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x370, 0x400), range(0x300, 0x370),
         range(0x4E00, 0x4E80), range(0x3040, 0x30FF), range(0x2000, 0x2070),
         range(0x1F300, 0x1F650), range(0xFF00, 0xFF60), range(0x600, 0x6FF),
         range(0x900, 0x97F), range(0, 0x20), range(0xFE00, 0xFE10), range(0xD7B0, 0xD7FF),
         range(0xE000, 0xE010), range(0x10000, 0x10100)]
NOTE = ("# Field notes, day {i}\n\nThe tide came in at 6:40 (two hours late); we moored the "
        "boats, checked the nets & logged 14 crabs -- a good haul. See [[harbour-log]] and "
        "https://example.org/tides?day={i}.\n\n- item one\n- item *two*\n")


def _counter() -> tuple[Tokenizer, FastCounter]:
    tokenizer = _counting_copy(bundled_tokenizer())
    counter = FastCounter.of(tokenizer)
    assert counter is not None  # the built-in model's tokenizer is one it counts
    return tokenizer, counter


def _exact(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=True)]


def test_ordinary_notes_are_counted_without_the_tokenizer_and_exactly() -> None:
    tokenizer, counter = _counter()
    texts = [NOTE.format(i=i) for i in range(200)]
    texts += ["Café au lait, naïve résumé — “smart quotes” and ‘these’ … done.",
              "Ελληνικά και 中文 mixed with English words."]
    assert counter.counts(texts) == _exact(tokenizer, texts)
    assert counter.fallbacks == 0


def test_any_text_is_counted_as_the_tokenizer_counts_it() -> None:
    tokenizer, counter = _counter()
    rng = random.Random(20261127)
    texts = []
    for _ in range(4000):
        text = "".join(chr(rng.choice(rng.choice(POOLS))) for _ in range(rng.randint(1, 60)))
        if rng.random() < 0.3:
            text = NOTE.format(i=rng.randint(0, 99))[:rng.randint(0, 200)] + text
        if rng.random() < 0.05:
            text += rng.choice(["[MASK]", "[cls]", " [SEP] ", "x[unk]"])
        if rng.random() < 0.05:
            text = "w" * rng.randint(90, 130)  # around the longest word WordPiece splits
        texts.append(text)
    assert counter.counts(texts) == _exact(tokenizer, texts)
    # Texts with control characters or an added token's text are left to the tokenizer.
    assert 0 < counter.fallbacks < len(texts) // 2


def test_a_tokenizer_of_another_kind_counts_alone() -> None:
    vocab = {"[UNK]": 0, "tide": 1, "boat": 2}
    other = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    other.normalizer = normalizers.Lowercase()
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    assert FastCounter.of(other) is None
    chunker = Chunker(other, size=200, overlap=20, max_tokens=64)
    assert chunker.count(["Tide boat", "tide, tide"]) == [2, 3]


def test_counts_stay_exact_when_the_words_remembered_are_forgotten(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer, counter = _counter()
    monkeypatch.setattr("pocketmcp.core.token_count.MAX_WORDS", 8)  # forgotten again and again
    texts = [NOTE.format(i=i) + " ünïcödé wörds" * (i % 2) for i in range(50)]
    assert counter.counts(texts) == _exact(tokenizer, texts)
    assert len(counter._words) <= 8 + 60  # one text's new words beyond the bound, at most


def test_words_too_long_for_the_model_are_counted_but_not_remembered() -> None:
    tokenizer, counter = _counter()
    texts = [f"{i:x}" * 40 + " short words" for i in range(300)]  # 80 to 120 characters
    assert counter.counts(texts) == _exact(tokenizer, texts)
    assert all(len(word) <= 100 for word in counter._words)


def test_a_tokenizer_matching_added_tokens_after_normalization_counts_alone() -> None:
    tokenizer = _counting_copy(bundled_tokenizer())
    tokenizer.add_tokens([AddedToken("ing", normalized=True)])  # "wíngs": w, ing, s
    assert FastCounter.of(tokenizer) is None
    chunker = Chunker(tokenizer, size=200, overlap=20, max_tokens=64)
    assert chunker.count(["the wíngs of a bírd"]) == _exact(tokenizer, ["the wíngs of a bírd"])
