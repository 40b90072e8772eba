"""The query embedding of the built-in model: session options against latency and vectors.

Each variant is a query session (embed/local.py's QueryEncoder) made with other options:
intra-op threads (1 or 2 on this 2-core machine), graph optimisation level, the CPU memory
arena. Rounds alternate the variants over the same new queries (SciFact's), so all see the
same machine load; a variant's p50/p95 are the medians over rounds. Its vectors are compared
with the current options' (largest absolute difference over every query). Also timed: the
tokenizer call alone, and the session's creation (the first search waits for it).

    .venv/bin/python bench/query_embed.py                # 200 queries, 5 rounds
    .venv/bin/python bench/query_embed.py --queries 100 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from pocketmcp.config import load
from pocketmcp.embed.local import QueryEncoder, QueryOptions
from pocketmcp.embed.models import ModelSpec, folder_tokenizer

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"
VARIANTS = {
    "current": QueryOptions(),
    "threads_2": QueryOptions(threads=2),
    "extended": QueryOptions(level="extended"),
    "basic": QueryOptions(level="basic"),
    "no_arena": QueryOptions(arena=False),
}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench" / "results" / "query_embed.json")
    args = parser.parse_args()
    with open(DATASET / "queries.jsonl", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle][:args.queries]
    spec = ModelSpec(load({}, environ={}).embed_settings())
    assert spec.path is not None
    tokenizer = folder_tokenizer(spec.path)
    lengths = [len(tokenizer.encode(t).ids) for t in texts]
    sessions: dict[str, QueryEncoder] = {}
    created: dict[str, float] = {}
    for name, options in VARIANTS.items():
        started = time.perf_counter()
        sessions[name] = QueryEncoder(spec.path / "model.onnx", tokenizer, options)
        created[name] = time.perf_counter() - started
        sessions[name].embed("warm up")
    reference = [sessions["current"].embed(t) for t in texts]
    p50s: dict[str, list[float]] = {name: [] for name in [*VARIANTS, "tokenizer"]}
    p95s: dict[str, list[float]] = {name: [] for name in p50s}
    for _ in range(args.rounds):
        times = []
        for text in texts:
            started = time.perf_counter()
            tokenizer.encode(text)
            times.append((time.perf_counter() - started) * 1000)
        p50s["tokenizer"].append(statistics.median(times))
        p95s["tokenizer"].append(pct(times, 0.95))
        for name, session in sessions.items():
            times = []
            for text in texts:
                started = time.perf_counter()
                session.embed(text)
                times.append((time.perf_counter() - started) * 1000)
            p50s[name].append(statistics.median(times))
            p95s[name].append(pct(times, 0.95))
    rows = {}
    for name in p50s:
        row: dict[str, object] = {"p50_ms": round(statistics.median(p50s[name]), 3),
                                  "p95_ms": round(statistics.median(p95s[name]), 3)}
        if name in sessions:
            vectors = [sessions[name].embed(t) for t in texts]
            row["max_abs_diff"] = float(max(np.abs(a - b).max()
                                            for a, b in zip(reference, vectors, strict=True)))
            row["created_s"] = round(created[name], 3)
            row["options"] = {"threads": VARIANTS[name].threads, "level": VARIANTS[name].level,
                              "arena": VARIANTS[name].arena}
        rows[name] = row
        print(name, json.dumps(row))
    result = {"cpus": os.cpu_count(), "load": os.getloadavg(), "queries": len(texts),
              "rounds": args.rounds, "tokens_p50": statistics.median(lengths),
              "tokens_max": max(lengths), "variants": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
