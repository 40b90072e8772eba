"""The same retrieval evaluation on both stores: `pocketmcp eval` of a folder (or a BEIR
data set) on SQLite and on a real Postgres with pgvector (the tests' embedded server), and
the difference per mode.

    .venv/bin/python bench/pg_parity.py bench/realdocs --corpus HATCH_DOCS
    .venv/bin/python bench/pg_parity.py ../shared/datasets/scifact-train --sample 100 220

Results: bench/results/pg_parity.json.

Figures on: docs/search.md (Postgres).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import data
from common import ROOT, parser_for, postgres, run_pocketmcp, write_results


def run_eval(dataset: str, corpus: str | None, env: dict[str, str]) -> dict[str, Any]:
    more = ["--corpus", corpus] if corpus else []
    answer: dict[str, Any] = run_pocketmcp("eval", dataset, "--json", *more,
                                           env={**os.environ, **env}, cwd=ROOT).answer
    return answer


def sample(dataset: Path, queries: int, others: int, folder: Path) -> str:
    """A part of a BEIR data set in `folder`: `queries` queries (fixed seed), every document
    relevant to them and `others` more."""
    relevant = data.qrels(dataset)
    chosen = sorted(relevant)
    random.Random(5).shuffle(chosen)
    chosen = chosen[:queries]
    need = {d for q in chosen for d in relevant[q]}
    docs = data.corpus(dataset=dataset)
    rest = [d for d in docs if d["_id"] not in need]
    random.Random(6).shuffle(rest)
    kept = [d for d in docs if d["_id"] in need] + rest[:others]
    return str(data.beir_part(folder, chosen, kept, relevant, dataset))


def main() -> None:
    parser = parser_for(__doc__, "pg_parity")
    parser.add_argument("dataset")
    parser.add_argument("--corpus")
    parser.add_argument("--sample", type=int, nargs=2, metavar=("QUERIES", "OTHERS"),
                        help="a part of a BEIR data set: that many queries, their documents "
                             "and that many others")
    parser.add_argument("--sqlite-result", type=Path,
                        help="the SQLite run's `eval --json` output, when made already")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgp-", dir="/tmp") as tmp:
        if args.sample:
            args.dataset = sample(Path(args.dataset), *args.sample, Path(tmp) / "part")
        sqlite = (json.loads(args.sqlite_result.read_text()) if args.sqlite_result else
                  run_eval(args.dataset, args.corpus,
                           {"SQLITE_PATH": f"{tmp}/index.db", "STORE": "sqlite"}))
        with postgres(Path(tmp) / "pg") as url:
            pg = run_eval(args.dataset, args.corpus,
                          {"STORE": "postgres", "DATABASE_URL": url,
                           "SQLITE_PATH": f"{tmp}/unused.db"})
    diff = {mode: {k: round(pg["modes"][mode][k] - v, 4) for k, v in m.items()
                   if k != "ms_per_query"} for mode, m in sqlite["modes"].items()}
    result = {"dataset": args.dataset, "corpus": args.corpus, "sqlite": sqlite["modes"],
              "postgres": pg["modes"], "postgres_minus_sqlite": diff,
              "chunks": {"sqlite": sqlite["chunks"], "postgres": pg["chunks"]}}
    write_results(args, result)
    for mode, d in diff.items():
        print(f"{mode}: sqlite nDCG@10 {sqlite['modes'][mode]['ndcg@10']:.4f}, postgres "
              f"{pg['modes'][mode]['ndcg@10']:.4f} ({d['ndcg@10']:+.4f})")


if __name__ == "__main__":
    main()
