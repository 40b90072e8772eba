"""CJK bigrams: FTS5 index size on a generated Japanese corpus, and the cost of building
keyword queries (English queries against the code before bigrams, CJK queries).

    .venv/bin/python bench/cjk.py                       # 2,000 sentences
    .venv/bin/python bench/cjk.py --sentences 20000 --base c2e495e

The Japanese corpus is made of sentences drawn from a fixed set of words and particles
(seeded, so every run makes the same corpus). Each variant is one contentless FTS5 table with
the project's tokenizer, in its own database file, merged with 'optimize' and vacuumed.

Results: bench/results/cjk.json.

Figures on: docs/benchmarks.md (the CJK table); docs/search-scores.md.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from common import ROOT, Stopwatch, parser_for, summary, write_results

from pocketmcp.core import keywords
from pocketmcp.core.cjk import index_text
from pocketmcp.store.sqlite.connect import sqlite_module

_NOUNS = """東京 京都 大阪 天気 機械学習 人工知能 コンピュータ データ 寺 神社 料理 電車 会社 学校
先生 学生 図書館 研究 経済 政治 歴史 文化 音楽 映画 写真 旅行 週末 家族 友達
プログラム ソフトウェア ネットワーク サーバー 情報 技術 問題 方法 結果 社会"""
_VERBS = """行きました 見ました 食べました 使います 学びます 調べました 作りました 話しました
考えます 始めました 読みました 書きました"""
_PARTICLES = "は が を に で と の も から まで"
NOUNS, VERBS, PARTICLES = _NOUNS.split(), _VERBS.split(), _PARTICLES.split()
ENGLISH = [
    "What is the role of the p53 protein in cancer?",
    "mitochondrial dysfunction in neurodegenerative disease",
    "Vitamin D supplementation reduces fracture risk in elderly patients",
    "effect of statins on cardiovascular mortality",
    "CRISPR gene editing off-target effects",
    "how does insulin resistance develop",
    "BRCA1 mutations and breast cancer incidence",
    "antibiotic resistance in hospital acquired infections",
]
CJK = ["京都", "機械学習", "コンピュータ", "Python の 使い方", "東京の天気", "人工智能 经济",
       "서울 맛집", "猫"]


def sentences(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(2, 4)):
            parts += [rng.choice(NOUNS), rng.choice(PARTICLES)]
        out.append("".join(parts) + rng.choice(VERBS) + "。")
    return out


def fts_size(folder: Path, name: str, texts: list[str]) -> dict[str, int]:
    path = folder / f"{name}.db"
    conn = sqlite_module().connect(str(path), isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, content='', contentless_delete=1, "
                 "tokenize='porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, row)")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)",
                     [(i + 1, text) for i, text in enumerate(texts)])
    conn.execute("COMMIT")
    conn.execute("INSERT INTO t(t) VALUES ('optimize')")
    conn.execute("VACUUM")
    terms = conn.execute("SELECT count(*) FROM v").fetchone()[0]
    data = conn.execute("SELECT sum(length(block)) FROM t_data").fetchone()[0]
    conn.close()
    return {"file_bytes": path.stat().st_size, "fts_data_bytes": data, "terms": terms}


def base_keywords(commit: str) -> ModuleType:
    """core/keywords.py as it was at `commit` (before bigrams), as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:pocketmcp/core/keywords.py"],
        check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("keywords_base", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, "keywords_base.py", "exec"), module.__dict__)
    return module


def timed(build: Callable[[str], None], queries: list[str], rounds: int) -> dict[str, float]:
    """Microseconds per query to get terms, the keys to look up and the MATCH expression."""
    watch = Stopwatch()
    for _ in range(rounds):
        for query in queries:
            with watch:
                build(query)
    return summary([ms * 1000 for ms in watch.times], unit="us", digits=1)


def main() -> None:
    parser = parser_for(__doc__, "cjk")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--base", default="c2e495e", help="commit before the bigrams")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    texts = sentences(args.sentences)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-cjk-") as tmp:
        plain = fts_size(Path(tmp), "unicode61", texts)
        bigram = fts_size(Path(tmp), "bigrams", [index_text(t) for t in texts])
    chars = sum(len(t) for t in texts)
    old = base_keywords(args.base)
    df = {"protein": 100}

    def new_build(query: str) -> None:
        keywords.fts_query(query, df, 1000)
        keywords.vocab_terms(keywords.terms(query))

    def old_build(query: str) -> None:
        old.fts_query(query, df, 1000)
        old.stems(old.terms(query))

    for f in (new_build, old_build):  # warm the stemmer
        f(ENGLISH[0])
    results = {
        "corpus": {"sentences": len(texts), "chars": chars, "example": texts[0]},
        "index_unicode61": plain, "index_bigrams": bigram,
        "growth": round(bigram["fts_data_bytes"] / plain["fts_data_bytes"], 2),
        "english_query_before": timed(old_build, ENGLISH, args.rounds),
        "english_query_after": timed(new_build, ENGLISH, args.rounds),
        "cjk_query_after": timed(new_build, CJK, args.rounds),
    }
    print(json.dumps(results, ensure_ascii=False, indent=2))
    write_results(args, results)


if __name__ == "__main__":
    main()
