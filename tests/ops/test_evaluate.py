"""`pocketmcp eval` on a small BEIR-format data set made here, and the metrics themselves."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.runtime import make_config

from pocketmcp.commands import evaluating
from pocketmcp.core.metrics import mrr_at, ndcg_at, recall_at

DOCS = {
    "d1": ("Sourdough", "A wild yeast starter leavens sourdough bread over many hours."),
    "d2": ("Volcanoes", "Basaltic lava flows from shield volcanoes such as those of Hawaii."),
    "d3": ("Tides", "The gravity of the moon raises the ocean tides twice a day."),
    "d4": ("Compilers", "A compiler translates source code into machine instructions."),
    "d5": ("Penguins", "Emperor penguins breed during the Antarctic winter."),
    "d6": ("Bees", "Honey bees communicate the direction of flowers with a waggle dance."),
}
QUERIES = {"q1": ("how do bees tell others where flowers are", "d6"),
           "q2": ("why does the sea level rise and fall each day", "d3"),
           "q3": ("bread made with natural yeast", "d1")}


def _dataset(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items()))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": k, "text": q}) + "\n" for k, (q, _) in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{k}\t{d}\t1\n" for k, (_, d) in QUERIES.items()))
    return folder


@pytest.mark.usefixtures("processes")
def test_eval_reports_each_mode_through_the_search_path(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "tiny")
    done = subprocess.run(
        [sys.executable, "-m", "pocketmcp", "eval", str(data), "--json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "SQLITE_PATH": str(tmp_path / "unused.db")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert (report["documents"], report["queries"]) == (6, 3)
    assert set(report["modes"]) == {"hybrid", "vector", "keyword"}
    for mode in ("hybrid", "vector"):
        assert report["modes"][mode]["mrr@10"] == 1.0, report["modes"]
        assert report["modes"][mode]["recall@100"] == 1.0
    assert not (tmp_path / "unused.db").exists()  # the index was a throwaway one


@pytest.mark.parametrize(
    ("ranked", "relevant", "ndcg", "recall", "mrr"),
    [
        (["a", "b"], {"a": 1}, 1.0, 1.0, 1.0),
        (["b", "a"], {"a": 1}, 1 / 1.5849625007211562, 1.0, 0.5),
        (["b", "c"], {"a": 1}, 0.0, 0.0, 0.0),
        (["a", "x", "b"], {"a": 2, "b": 1}, (2 + 1 / 2) / (2 + 1 / 1.5849625007211562),
         1.0, 1.0),
    ],
)
def test_metrics_follow_their_definitions(ranked, relevant, ndcg, recall, mrr) -> None:
    assert ndcg_at(ranked, relevant) == pytest.approx(ndcg)
    assert recall_at(ranked, relevant) == pytest.approx(recall)
    assert mrr_at(ranked, relevant) == pytest.approx(mrr)


async def test_eval_on_postgres_gives_the_figures_of_sqlite(
        tmp_path: Path, pg_url: str, pg_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same labelled set through `pocketmcp eval` on both stores, each in a throwaway
    index of its own. Vector figures are equal: an HNSW graph of six nodes is searched
    whole, so approximation plays no part (bench/pg_scale.py measures it at scale). Hybrid
    figures may differ by one rank of one query (keyword scores differ: BM25 against
    ts_rank_cd). Keyword figures are not compared: SQLite's keyword search drops words held
    by more than a tenth of the chunks, which in six documents is every word, while the
    Postgres store drops words by an absolute count (2,000 chunks)."""
    import psycopg  # an optional dependency, installed for the tests

    data = _dataset(tmp_path / "tiny")
    reports = {}
    for store in ("sqlite", "postgres"):
        (tmp_path / store).mkdir()
        env = {} if store == "sqlite" else {"STORE": "postgres", "DATABASE_URL": pg_url,
                                            "PG_SCHEMA": pg_schema}
        args = argparse.Namespace(dataset=str(data), modes="hybrid,vector,keyword",
                                  split=None, corpus=None, index=None, params=None, json=True)
        assert await evaluating.run(make_config(tmp_path / store, env), args) == 0
        out = capsys.readouterr().out  # the report, after any log lines
        reports[store] = json.loads(out[out.index("{\n"):])
    lite, pg = reports["sqlite"], reports["postgres"]
    assert (pg["documents"], pg["queries"], pg["chunks"]) == (
        lite["documents"], lite["queries"], lite["chunks"])
    quality = {mode: {k: v for k, v in figures.items() if k != "ms_per_query"}
               for mode, figures in lite["modes"].items()}
    assert {k: v for k, v in pg["modes"]["vector"].items() if k != "ms_per_query"} == (
        quality["vector"])
    for metric, value in quality["hybrid"].items():
        assert pg["modes"]["hybrid"][metric] == pytest.approx(value, abs=0.5 / 3), metric
    assert pg["modes"]["hybrid"]["mrr@10"] == pg["modes"]["keyword"]["mrr@10"] == 1.0
    with psycopg.connect(pg_url) as conn:  # the throwaway index was dropped
        assert conn.execute(b"SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s",
                            (pg_schema + "\\_eval\\_%",)).fetchone() == (0,)
