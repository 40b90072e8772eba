"""The same retrieval evaluation on both stores: `pocketmcp eval` of a folder (or a BEIR
data set) on SQLite and on a real Postgres with pgvector (the tests' embedded server), and
the difference per mode.

    .venv/bin/python bench/pg_parity.py bench/realdocs --corpus HATCH_DOCS
    .venv/bin/python bench/pg_parity.py ../shared/datasets/scifact-train --sample 100 220

Results: bench/results/pg_parity.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import ROOT, add_result_args, write_results

sys.path.insert(0, str(ROOT / "tests"))


def run_eval(dataset: str, corpus: str | None, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pocketmcp", "eval", dataset, "--json"]
    if corpus:
        cmd += ["--corpus", corpus]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env},
                          check=False, cwd=ROOT)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def sample(dataset: Path, queries: int, others: int, folder: Path) -> str:
    """A part of a BEIR data set in `folder`: `queries` queries (fixed seed), every document
    relevant to them and `others` more."""
    qrels: dict[str, list[str]] = {}
    lines = next((dataset / "qrels").glob("*.tsv")).read_text().splitlines()
    for line in lines[1:]:
        q, d, _ = line.split("\t")
        qrels.setdefault(q, []).append(d)
    chosen = sorted(qrels)
    random.Random(5).shuffle(chosen)
    chosen = chosen[:queries]
    need = {d for q in chosen for d in qrels[q]}
    docs = [json.loads(line) for line in (dataset / "corpus.jsonl").open(encoding="utf-8")]
    rest = [d for d in docs if d["_id"] not in need]
    random.Random(6).shuffle(rest)
    kept = [d for d in docs if d["_id"] in need] + rest[:others]
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in kept))
    (folder / "queries.jsonl").write_text("".join(
        line for line in (dataset / "queries.jsonl").open(encoding="utf-8")
        if json.loads(line)["_id"] in chosen))
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t1\n" for q in chosen for d in qrels[q]))
    return str(folder)


def main() -> None:
    from support.pg_server import local_postgres

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--corpus")
    parser.add_argument("--sample", type=int, nargs=2, metavar=("QUERIES", "OTHERS"),
                        help="a part of a BEIR data set: that many queries, their documents "
                             "and that many others")
    parser.add_argument("--sqlite-result", type=Path,
                        help="the SQLite run's `eval --json` output, when made already")
    add_result_args(parser, "pg_parity")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgp-", dir="/tmp") as tmp:
        if args.sample:
            args.dataset = sample(Path(args.dataset), *args.sample, Path(tmp) / "part")
        sqlite = (json.loads(args.sqlite_result.read_text()) if args.sqlite_result else
                  run_eval(args.dataset, args.corpus,
                           {"SQLITE_PATH": f"{tmp}/index.db", "STORE": "sqlite"}))
        with local_postgres(Path(tmp)) as url:
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
