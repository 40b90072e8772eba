"""`pocketmcp eval DATASET_DIR`: retrieval quality on a BEIR-format data set.

The corpus is written as Markdown files (`# title` then the text) and indexed by the normal
pipeline into a throwaway index (or one kept with --index). Every query then goes through
`search.search`, the code path of the MCP `search` tool, in each mode. A document ranks at its
best chunk. Reports nDCG@10, Recall@100 and MRR@10.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from pocketmcp import logs
from pocketmcp.config import Config
from pocketmcp.errors import PocketError
from pocketmcp.search import MODES, Mode, Params

log = logs.get("pocketmcp.eval")


class Dataset(msgspec.Struct, frozen=True):
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_dataset(folder: Path, split: str | None = None) -> Dataset:
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / name).is_file():
            raise PocketError(f"{folder} is not a BEIR data set: {name} is missing")
    qrel_files = sorted((folder / "qrels").glob("*.tsv"))
    if split:
        qrel_files = [f for f in qrel_files if f.stem == split]
    if not qrel_files:
        raise PocketError(f"no qrels/*.tsv in {folder}" + (f" for split {split}" if split else ""))
    qrels: dict[str, dict[str, int]] = {}
    with open(qrel_files[0], encoding="utf-8") as handle:
        for i, line in enumerate(handle):
            parts = line.rstrip("\n").split("\t")
            if i == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # header
            if len(parts) >= 3 and int(parts[2]) > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")
               if q["_id"] in qrels}
    return Dataset(queries, qrels)


def file_name(doc_id: str) -> str:
    return doc_id.replace("%", "%25").replace("/", "%2F") + ".md"


def doc_of(path: str) -> str:
    return path.removesuffix(".md").replace("%2F", "/").replace("%25", "%")


def write_corpus(folder: Path, dataset_dir: Path) -> int:
    """The corpus as Markdown files; unchanged files are left alone (and not re-indexed)."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for doc in _jsonl(dataset_dir / "corpus.jsonl"):
        title = " ".join(str(doc.get("title") or "").split())
        text = f"# {title}\n\n{doc.get('text', '')}\n" if title else f"{doc.get('text', '')}\n"
        path = folder / file_name(str(doc["_id"]))
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        count += 1
    return count


# -- metrics ------------------------------------------------------------------------------------

def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def mrr_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    for rank, doc in enumerate(ranked[:k]):
        if doc in relevant:
            return 1.0 / (rank + 1)
    return 0.0


def score_run(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
              ) -> dict[str, float]:
    n = len(runs)
    return {
        "ndcg@10": sum(ndcg_at(r, qrels[q]) for q, r in runs.items()) / n,
        "recall@100": sum(recall_at(r, qrels[q]) for q, r in runs.items()) / n,
        "mrr@10": sum(mrr_at(r, qrels[q]) for q, r in runs.items()) / n,
    }


# -- running ------------------------------------------------------------------------------------

async def build_index(config: Config, *, progress: bool = True) -> dict[str, Any]:
    """Index config.watch_dir into config.sqlite_path, like `pocketmcp index`."""
    from pocketmcp.engine import Engine, open_writer
    from pocketmcp.model import ModelSpec
    from pocketmcp.pipeline.supervisor import Pipeline

    spec = await anyio.to_thread.run_sync(ModelSpec, config)
    writer = await anyio.to_thread.run_sync(open_writer, config, spec)
    started = time.perf_counter()
    try:
        engine = await Engine.load(config, spec)
        pipeline = Pipeline(config, writer=writer, embed=engine.embedder.embed,
                            dim=spec.dim, chunker=engine.chunker, follow=False,
                            embed_limiter=engine.model_limiter)
        async with anyio.create_task_group() as tg:
            if progress:
                from pocketmcp.cli import _progress

                tg.start_soon(_progress, pipeline, name="pocketmcp.progress")
            await pipeline.run()
            tg.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(writer.close)
    s = pipeline.stats
    return {"files": s.seen, "chunks_embedded": s.chunks_embedded,
            "seconds": round(time.perf_counter() - started, 1)}


async def evaluate(service: Any, dataset: Dataset, modes: Sequence[Mode],
                   params: Params) -> dict[str, dict[str, float]]:
    """Metrics per mode, every query through search.search with one hit per document."""
    from pocketmcp.search import search

    results: dict[str, dict[str, float]] = {}
    for mode in modes:
        runs: dict[str, list[str]] = {}
        started = time.perf_counter()
        for qid, text in dataset.queries.items():
            matches = await search(service, text, top_k=100, mode=mode, unique_docs=True,
                                   params=params)
            runs[qid] = [doc_of(m.path) for m in matches if m.path]
        elapsed = time.perf_counter() - started
        results[mode] = {**score_run(runs, dataset.qrels),
                         "ms_per_query": elapsed * 1000 / max(1, len(runs))}
    return results


async def run(config: Config, dataset_dir: Path, *, modes: Sequence[Mode] = MODES,
              index: Path | None = None, split: str | None = None,
              params: Params | None = None) -> dict[str, Any]:
    from pocketmcp.service import Service

    dataset = load_dataset(dataset_dir, split)
    with tempfile.TemporaryDirectory(prefix="pocketmcp-eval-") as tmp:
        db = index if index is not None else Path(tmp) / "index.db"
        corpus = db.with_name(db.name + ".corpus")
        files = await anyio.to_thread.run_sync(write_corpus, corpus, dataset_dir)
        config = config.replace(watch_dir=corpus, sqlite_path=db, watch_dir_given=True)
        built = await build_index(config, progress=sys.stderr.isatty())
        service = Service(config, watch=False)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(service.run, name="pocketmcp.service")
                await service.started()
                counts = await service.readers.run(lambda r: r.counts())
                metrics = await evaluate(service, dataset, modes, params or Params())
                await service.shutdown()
                tg.cancel_scope.cancel()
        finally:
            service.close()
    return {"dataset": str(dataset_dir), "documents": files, "queries": len(dataset.queries),
            "chunks": counts["chunks"], "index": built,
            "params": msgspec.to_builtins(params or Params()), "modes": metrics}


def table(report: Mapping[str, Any]) -> str:
    lines = [f"{report['dataset']}: {report['documents']} documents, {report['chunks']} chunks, "
             f"{report['queries']} queries",
             "| mode | nDCG@10 | Recall@100 | MRR@10 | ms/query |",
             "| --- | --- | --- | --- | --- |"]
    for mode, m in report["modes"].items():
        lines.append(f"| {mode} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | "
                     f"{m['mrr@10']:.4f} | {m['ms_per_query']:.1f} |")
    return "\n".join(lines)
