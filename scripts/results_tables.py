"""Prints the README's tables of measured figures from bench/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def search_table() -> str:
    data = json.loads((RESULTS / "search.json").read_text())
    rows = ["| chunks | hybrid p50 / p95 | vector p50 / p95 | keyword p50 / p95 | vector stage "
            "p50 | numpy scan p50 | stage / numpy | recall@10 | index memory | load |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows += [
        f"| {r['chunks']:,} | {r['hybrid']['p50_ms']:.1f} / {r['hybrid']['p95_ms']:.1f} ms "
        f"| {r['vector']['p50_ms']:.1f} / {r['vector']['p95_ms']:.1f} ms "
        f"| {r['keyword']['p50_ms']:.1f} / {r['keyword']['p95_ms']:.1f} ms "
        f"| {r['vector_stage_p50_ms']:.2f} ms | {r['numpy_scan_p50_ms']:.2f} ms "
        f"| {r['stage_over_numpy']:.2f} | {r['recall@10']:.4f} "
        f"| {r['vector_index_mib']:.0f} MiB | {r['load_s']:.1f} s |"
        for r in data["results"]]
    return "\n".join(rows)


def ingest_table() -> str:
    data = json.loads((RESULTS / "ingest.json").read_text())
    t = data["throughput"]
    rows = ["| measure | value |", "| --- | --- |",
            f"| pipeline, chunks/s (best of {len(t['pipeline_runs'])}) | "
            f"{t['pipeline_chunks_per_s']:.1f} |",
            f"| bare fastembed on the same chunks, chunks/s | {t['bare_chunks_per_s']:.1f} |",
            f"| **ratio pipeline / bare** | **{t['ratio']:.3f}** |",
            f"| peak RSS of `pocketmcp index`, {t['files']:,} abstracts | "
            f"{t['peak_rss_mib']:.0f} MiB |"]
    rows += [f"| peak RSS of `pocketmcp index`, {m['files']:,} notes | {m['peak_rss_mib']:.0f} "
             f"MiB ({m['files_per_s']:.0f} files/s) |" for m in data["memory"]]
    return "\n".join(rows)


def eval_table(path: Path) -> str:
    data = json.loads(path.read_text())
    rows = ["| mode | nDCG@10 | Recall@100 | MRR@10 |", "| --- | --- | --- | --- |"]
    for mode, m in data["modes"].items():
        rows.append(f"| {mode} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | "
                    f"{m['mrr@10']:.4f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    which = sys.argv[1]
    if which == "search":
        print(search_table())
    elif which == "ingest":
        print(ingest_table())
    else:
        print(eval_table(RESULTS / "eval.json"))
