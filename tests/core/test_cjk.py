"""Chinese, Japanese and Korean keyword search: bigram index text, queries, end to end."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from support.tools import Tools

from pocketmcp.core.cjk import RANGES, bigrams, has_cjk, index_text
from pocketmcp.core.keywords import fts_query, stems, terms, vocab_terms
from pocketmcp.store.sqlite.connect import sqlite_module

# -- index text -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("東京都に行く", "東京 京都 都に に行 行く"),
        ("猫", "猫"),  # a one-character run stays as it is
        ("人々は", "人々 々は"),  # 々 (iteration mark) belongs to the run
        ("コンピューター", "コン ンピ ピュ ュー ータ ター"),  # ー, the prolonged sound mark
        ("ｺﾝﾋﾟｭｰﾀ", "ｺﾝ ﾝﾋ ﾋﾟ ﾟｭ ｭｰ ｰﾀ"),  # halfwidth katakana, voiced marks included
        ("ドナルド・ダック", "ドナ ナル ルド ・ ダッ ック"),  # the middle dot separates words
        ("Pythonの使い方", "Python の使 使い い方"),  # set apart from the letters it touches
        ("東京s and 2024年", "東京 s and 2024 年"),
        ("「京都」へ。", "「 京都 」 へ 。"),
        ("서울에서 만나요", "서울 울에 에서 만나 나요"),
        ("我喜欢北京", "我喜 喜欢 欢北 北京"),
        ("𠮷野家", "𠮷野 野家"),  # Extension B, outside the Basic Multilingual Plane
    ],
)
def test_cjk_runs_become_overlapping_bigrams(text: str, expected: str) -> None:
    assert index_text(text) == expected


@pytest.mark.parametrize("text", ["", "plain English, café crème", "x = 1 # ・ ゛ ゠", "Ω≈ç√"])
def test_text_without_cjk_is_indexed_unchanged(text: str) -> None:
    assert index_text(text) is text
    assert not has_cjk(text)


@pytest.mark.parametrize(
    ("char", "cjk"),
    [("一", True), ("鿿", True), ("㐀", True), ("豈", True), ("𠀀", True), ("々", True),
     ("ぁ", True), ("ゖ", True), ("ゝ", True), ("゛", False), ("゙", False),
     ("ァ", True), ("ヺ", True), ("ー", True), ("・", False), ("゠", False), ("ㇰ", True),
     ("ｦ", True), ("ｰ", True), ("ﾟ", True), ("｡", False),
     ("가", True), ("힣", True), ("ᄀ", True), ("ㄱ", True),
     ("A", False), ("é", False), ("Я", False), ("。", False), ("、", False), ("１", False)],
)
def test_the_ranges_hold_the_scripts_and_not_their_punctuation(char: str, cjk: bool) -> None:
    assert has_cjk(char) is cjk


def test_the_ranges_are_sorted_and_disjoint() -> None:
    ordered = sorted(RANGES)
    assert all(a <= b for a, b in ordered)
    assert all(prev[1] < nxt[0] for prev, nxt in pairwise(ordered))


def test_bigrams_of_short_runs() -> None:
    assert bigrams("") == []
    assert bigrams("猫") == ["猫"]
    assert bigrams("京都") == ["京都"]
    assert bigrams("機械学習") == ["機械", "械学", "学習"]


# -- queries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "words", "match"),
    [
        ("京都", ["京都"], '"京都"'),
        ("機械学習", ["機械学習"], '"機械 械学 学習"'),
        ("コンピュータ", ["コンピュータ"], '"コン ンピ ピュ ュー ータ"'),
        ("Python の 使い方", ["python", "使い方"], '"python" OR "使い い方"'),
        ("Pythonの使い方", ["python", "の使い方"], '"python" OR "の使 使い い方"'),
        ("猫 が 好き", ["猫", "好き"], '"猫" * OR "好き"'),  # lone hiragana: a particle
        ("What is 東京都?", ["東京都"], '"東京 京都"'),
        ("北京 北京 中文", ["北京", "中文"], '"北京" OR "中文"'),
        ("서울 맛집", ["서울", "맛집"], '"서울" OR "맛집"'),
        ("の は を", [], None),
        # Longer runs of kanji and kana are several words typed without spaces: by bigram.
        ("東京の天気予報", ["東京", "京の", "の天", "天気", "気予", "予報"],
         '"東京" OR "京の" OR "の天" OR "天気" OR "気予" OR "予報"'),
        ("インターネット", ["インターネット"], '"イン ンタ ター ーネ ネッ ット"'),
    ],
)
def test_a_cjk_run_in_a_query_is_the_phrase_of_its_bigrams(
    query: str, words: list[str], match: str | None
) -> None:
    assert terms(query) == words
    assert fts_query(query) == match


def test_a_cjk_phrase_is_one_term_for_the_budgets_counted_by_its_rarest_bigram() -> None:
    words = terms("機械学習 protein cells")
    assert vocab_terms(words) == ["機械", "械学", "学習", "protein", "cell"]
    df = {"機械": 900, "械学": 30, "学習": 5_000, "protein": 100, "cell": 90_000}
    # 機械学習 is in at most 30 chunks: the rarest term; "cells" breaks the budget.
    assert fts_query("機械学習 protein cells", df, total=1_000_000,
                     budget=30_000) == '"機械 械学 学習" OR "protein"'
    assert fts_query("猫 cells", {"猫*": 10, "cell": 90_000}, total=1_000_000,
                     budget=30_000) == '"猫" *'


def test_latin_queries_look_up_the_same_stems_as_before() -> None:
    words = terms("What is the role of the p53 protein in cancer cells?")
    assert vocab_terms(words) == stems(words)


def test_the_porter_stemmer_leaves_cjk_alone() -> None:
    # The query side never stems a CJK term; FTS5's porter leaves non-ASCII tokens alone too.
    words = ["東京", "京都", "です", "ング", "서울", "코드"]
    assert stems(words) == words


@pytest.fixture
def fts() -> Iterator[Any]:
    """The project's FTS5 tokenizer, in memory, with its vocabulary."""
    conn = sqlite_module().connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, content='', contentless_delete=1, "
                 "tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, row)")
    try:
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize("text", ["東京都に行きました", "コンピューターを使う", "人々の暮らし",
                                  "我喜欢在北京学习中文", "서울에서김치를먹었어요"])
def test_fts5_keeps_the_bigrams_and_every_substring_is_found(fts: Any, text: str) -> None:
    fts.execute("INSERT INTO t(rowid, text) VALUES (1, ?)", (index_text(text),))
    assert {row[0] for row in fts.execute("SELECT term FROM v")} == set(bigrams(text))
    for i in range(len(text)):
        for j in range(i + 2, len(text) + 1):
            query = fts_query(text[i:j])
            if query is not None:  # a lone particle is not searched for
                assert fts.execute("SELECT rowid FROM t WHERE t MATCH ?",
                                   (query,)).fetchall() == [(1,)], text[i:j]


# -- end to end -------------------------------------------------------------------------------




DOCS = {
    "tokyo": "東京の天気は晴れです。東京都では明日も暑くなるでしょう。",
    "kyoto": "京都の寺は古くて美しい。京都には金閣寺や清水寺があります。",
    "ml": "機械学習はデータからパターンを学ぶ技術です。コンピュータで大量のデータを処理します。",
    "python": "Pythonの使い方を説明します。まずインストールから始めましょう。",
    "cat": "猫が好きです。毎朝えさをあげます。",
    "zh": "人工智能正在改变世界的经济结构，我喜欢在北京学习中文。",
    "ko": "서울에서 친구와 김치찌개를 먹었어요.",
    "en": "The weather report for Tokyo says it will be sunny.",
}


async def test_keyword_search_finds_chinese_japanese_and_korean_words(fake_tools: Tools
                                                                      ) -> None:
    tools = fake_tools
    # External ids (the titles) hold no word of the queries.
    ids = await tools.add(*((f"n{i}", t) for i, t in enumerate(DOCS.values())))
    names = {ids[f"n{i}"]: name for i, name in enumerate(DOCS)}

    async def found(query: str, **kw: Any) -> list[str]:
        return [names[m["doc_id"]] for m in await tools.search(query, mode="keyword", **kw)]

    assert await found("機械学習") == ["ml"]
    assert await found("コンピュータ") == ["ml"]
    assert await found("東京") == ["tokyo"]
    assert await found("Python の 使い方") == ["python"]
    assert await found("Pythonの使い方") == ["python"]
    assert await found("猫") == ["cat"]  # a lone character: the terms it starts
    assert await found("北京") == ["zh"]
    assert await found("人工智能 经济") == ["zh"]
    assert await found("서울") == ["ko"]
    assert await found("Tokyo weather") == ["en"]
    assert await found("機械学習", unique_docs=True) == ["ml"]
    # 京都 finds the Kyoto note first, and the Tokyo one after it: 東京都 (Tokyo Metropolis,
    # 東京 + 都) holds the bigram 京都. Bigrams know no word boundaries; this is the known cost
    # of a bigram index (Lucene's CJKAnalyzer has it too), short of a Japanese morphological
    # analyser. The Kyoto note says 京都 twice, so BM25 puts it first.
    assert await found("京都") == ["kyoto", "tokyo"]
    assert await found("京都の寺") == ["kyoto"]  # a longer phrase is precise
    # A sentence typed without spaces need not occur verbatim: its rarer bigrams decide.
    assert (await found("東京の天気予報"))[0] == "tokyo"
    # The note holds 4 of the sentence's 11 bigrams: found first, at a keyword score below
    # the default threshold (a text holding each of them once would score 0.5).
    assert (await found("金閣寺と清水寺に行きたい", score_threshold=0))[0] == "kyoto"
