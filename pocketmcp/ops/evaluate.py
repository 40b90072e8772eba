"""Retrieval quality on a BEIR-format data set (`pocketmcp eval DATASET_DIR`).

The corpus is written as Markdown files (`# title` then the text) for the normal pipeline to
index; or, with `--corpus FOLDER`, the folder itself is indexed and its files' paths relative
to it are the corpus ids. Every query then goes through `search.run.search`, the code path of
the MCP `search` tool, in each mode, with one match per document. Reports nDCG@10,
Recall@100, MRR@10, hit@1 and hit@5.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from pocketmcp.core.metrics import score_run
from pocketmcp.errors import PocketError
from pocketmcp.plans import Reading
from pocketmcp.search.run import Mode, Params, search


class Dataset(msgspec.Struct, frozen=True):
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_dataset(folder: Path, split: str | None = None, *, corpus: bool = True) -> Dataset:
    """Queries and qrels; `corpus`: corpus.jsonl must be there too."""
    for name in ("corpus.jsonl", "queries.jsonl") if corpus else ("queries.jsonl",):
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


# -- running ------------------------------------------------------------------------------------

async def evaluate(reading: Reading, dataset: Dataset, modes: Sequence[Mode],
                   params: Params, name: Callable[[str], str] = doc_of
                   ) -> dict[str, dict[str, float]]:
    """Metrics per mode, every query through the search op with one match per document;
    `name` turns a match's path into its corpus id."""
    results: dict[str, dict[str, float]] = {}
    for mode in modes:
        runs: dict[str, list[str]] = {}
        started = time.perf_counter()
        for qid, text in dataset.queries.items():
            found = await search(reading, text, top_k=100, mode=mode, unique_docs=True,
                                 params=params, fallback=False)
            runs[qid] = [name(m.path) for m in found.matches if m.path]
        elapsed = time.perf_counter() - started
        results[mode] = {**score_run(runs, dataset.qrels),
                         "ms_per_query": elapsed * 1000 / max(1, len(runs))}
    return results


def report(dataset_dir: Path, files: int, dataset: Dataset, chunks: int,
           built: Mapping[str, Any], params: Params,
           metrics: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    return {"dataset": str(dataset_dir), "documents": files, "queries": len(dataset.queries),
            "chunks": chunks, "index": dict(built), "params": msgspec.to_builtins(params),
            "modes": dict(metrics)}


def table(report: Mapping[str, Any]) -> str:
    lines = [f"{report['dataset']}: {report['documents']} documents, {report['chunks']} chunks, "
             f"{report['queries']} queries",
             "| mode | nDCG@10 | Recall@100 | MRR@10 | hit@1 | hit@5 | ms/query |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for mode, m in report["modes"].items():
        lines.append(f"| {mode} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | "
                     f"{m['mrr@10']:.4f} | {m['hit@1']:.4f} | {m['hit@5']:.4f} | "
                     f"{m['ms_per_query']:.1f} |")
    return "\n".join(lines)
