"""Search latency and recall at 10k / 50k / 200k / 1M chunks.

Vectors are realistic: each synthetic chunk is a real SciFact chunk embedding mixed with a
second one and a little noise, then normalised, and carries that chunk's real text (so BM25
sees real term statistics). Queries are real SciFact claims embedded by the model. For each
size an index file is written through the store (vec0 + FTS5 + documents), then:

- p50/p95 of the whole `search` call per mode (query embedding included), through the same
  code path as the MCP tool;
- the vector stage as those calls run it, after the query embedding
  (`vector_stage_in_calls`);
- recall@10 of the vector stage against exact float32 search;
- the vector stage alone against a plain numpy scan (float32 matmul + argpartition) of the
  same vectors, measured in the same run, query by query: each stage runs right after a
  scan that streamed every float32 vector through the caches (`vector_stage_*`, a cold
  worst case);
- the size of the vector file on disk (mapped: the page cache holds it, not the heap).

    .venv/bin/python bench/search.py                          # 10k,50k,200k,1M
    .venv/bin/python bench/search.py --sizes 10000,50000 --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "scifact-train"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def base_vectors(cache: Path, docs: int, index: Path | None
                 ) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """(chunk vectors, chunk texts, query vectors, query texts) from SciFact, cached.

    With `index` (e.g. one kept by `pocketmcp eval --index`), its chunks are the base."""
    if cache.exists():
        data = np.load(cache, allow_pickle=False)
        return (data["vectors"], [str(t) for t in data["texts"]], data["queries"],
                [str(t) for t in data["query_texts"]])
    from pocketmcp.config import load
    from pocketmcp.core.chunking import Chunker
    from pocketmcp.embed.local import LocalEmbedder
    from pocketmcp.embed.models import ModelSpec

    embedder = LocalEmbedder(ModelSpec(load({}, environ={}).embed_settings()))
    if index is not None:
        from pocketmcp.store.sqlite.connect import open_sync_reader

        conn = open_sync_reader(index)
        rows = conn.execute("SELECT embedding, text FROM vec_chunks").fetchall()
        conn.close()
        vectors = np.frombuffer(b"".join(r[0] for r in rows), np.float32).reshape(len(rows), -1)
        texts = [r[1] for r in rows]
    else:
        chunker = Chunker(embedder.tokenizer, size=1000, overlap=120,
                          max_tokens=embedder.max_tokens)
        texts = []
        with open(DATASET / "corpus.jsonl", encoding="utf-8") as handle:
            for i, line in enumerate(handle):
                if i >= docs:
                    break
                doc = json.loads(line)
                texts += [c.text for c in chunker.split(f"# {doc['title']}\n\n{doc['text']}")]
        print(f"embedding {len(texts)} base chunks once (cached in {cache})", file=sys.stderr)
        vectors = np.concatenate([embedder.embed(texts[i:i + 1]) for i in range(len(texts))])
    with open(DATASET / "queries.jsonl", encoding="utf-8") as handle:
        query_texts = [json.loads(line)["text"] for line in handle]
    queries = np.concatenate([embedder.embed([q]) for q in query_texts])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors, texts=np.asarray(texts), queries=queries,
             query_texts=np.asarray(query_texts))
    return vectors, texts, queries, query_texts


def synthesise(base: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n unit vectors mixed from pairs of real ones; (vectors, index of the text each uses)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(base), n)
    b = rng.integers(0, len(base), n)
    mix = rng.uniform(0.0, 0.5, n).astype(np.float32)[:, None]
    noise = rng.normal(0, 0.02, (n, base.shape[1])).astype(np.float32)
    out = base[a] + mix * base[b] + noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32), a


def prepare(db: Path, dim: int) -> None:
    """Bring the index's vector file up to date, as its writer would on start."""
    from pocketmcp.core.identity import Identity
    from pocketmcp.store.sqlite.writes import SqliteWriter

    writer = SqliteWriter(db, Identity(model="sentence-transformers/all-MiniLM-L6-v2",
                                      dim=dim))
    try:
        writer.repair_vectors()
    finally:
        writer.close()


def synthetic_doc(d: int, per_doc: int, texts: list[str], text_of: np.ndarray
                  ) -> tuple[list[Any], str]:
    """Document `d` of a synthesised index: its `per_doc` chunks (texts picked by `text_of`)
    and its whole text."""
    from pocketmcp.core.text import sha256
    from pocketmcp.messages import Chunk

    chunks, parts, offset = [], [], 0
    for i in range(per_doc):
        text = texts[int(text_of[d * per_doc + i])]
        chunks.append(Chunk(idx=i, start=offset, end=offset + len(text), text=text,
                            tokens=200, sha256=sha256(f"{d}:{i}")))
        parts.append(text)
        offset += len(text)
    return chunks, "".join(parts)


def build_index(path: Path, vectors: np.ndarray, text_of: np.ndarray, texts: list[str],
                per_doc: int = 4) -> None:
    from pocketmcp.core.identity import Identity
    from pocketmcp.messages import DocRecord
    from pocketmcp.store.sqlite.writes import SqliteWriter

    writer = SqliteWriter(path, Identity(model="sentence-transformers/all-MiniLM-L6-v2",
                                        dim=vectors.shape[1]))
    try:
        n = len(vectors)
        step = 5000
        for start in range(0, n, step):
            writer.begin()
            for d in range(start // per_doc, min(n, start + step) // per_doc):
                chunks, _ = synthetic_doc(d, per_doc, texts, text_of)
                writer.upsert(DocRecord(external_id=f"file:doc{d}.md", source="file",
                                        uri=None, title=f"Document {d}", content="",
                                        sha256=str(d)),
                              chunks, vectors[d * per_doc:(d + 1) * per_doc].tobytes())
            writer.commit()
    finally:
        writer.close()


async def measure(db: Path, vectors: np.ndarray, queries: np.ndarray, query_texts: list[str],
                  repeats: int) -> dict:
    from pocketmcp.config import load
    from pocketmcp.ops.search import DEFAULT_PARAMS, candidates_for
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime

    config = load({}, environ={"SQLITE_PATH": str(db), "WATCH_DIR": str(db.parent / "none")})
    out: dict = {}
    started = time.perf_counter()
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        out["load_s"] = round(time.perf_counter() - started, 2)
        reading = await runtime.reading()
        index = reading.index.vectors
        assert index.reason is None, index.reason  # the vector file answers, not SQLite
        out["vector_index_mib"] = round(index.path.stat().st_blocks * 512 / 2**20, 1)
        out.update(await search_calls(reading, query_texts, repeats))
        # The vector stage alone against a numpy scan, and recall against exact search.
        ids_all = np.arange(1, len(vectors) + 1)
        stage, scan, hits = [], [], 0
        for q in queries[:repeats]:
            t = time.perf_counter()
            exact_top = np.argpartition(-(vectors @ q), 10)[:10]
            scan.append((time.perf_counter() - t) * 1000)

            def run(reader, q=q):
                t0 = time.perf_counter()
                found, _, _ = index.search(reader.log, q, 10,
                                           candidates_for(index.live, DEFAULT_PARAMS))
                return found.tolist(), (time.perf_counter() - t0) * 1000

            got, ms = await reading.index.run(run)
            stage.append(ms)
            hits += len(set(got) & set(ids_all[exact_top].tolist()))
        out["vector_stage_p50_ms"] = round(statistics.median(stage), 2)
        out["vector_stage_p95_ms"] = round(pct(stage, 0.95), 2)
        out["numpy_scan_p50_ms"] = round(statistics.median(scan), 2)
        out["numpy_scan_p95_ms"] = round(pct(scan, 0.95), 2)
        out["stage_over_numpy"] = round(out["vector_stage_p50_ms"]
                                        / out["numpy_scan_p50_ms"], 3)
        out["recall@10"] = round(hits / (10 * repeats), 4)
    return out


async def search_calls(reading: Any, query_texts: list[str], repeats: int
                       ) -> dict[str, dict[str, float]]:
    """Whole search calls per mode, p50 / p95 in ms, the embedding of a new query included:
    each mode gets its own queries, so none is answered from the cache of query vectors.
    Also the vector stage as those calls run it (after the query embedding, in hybrid and
    vector calls): `vector_stage_in_calls`."""
    import pocketmcp.ops.search as ops

    out = {}
    in_calls: list[float] = []
    real = ops._vector_stage

    def timed(*args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        try:
            real(*args, **kwargs)
        finally:
            in_calls.append((time.perf_counter() - t) * 1000)

    ops._vector_stage = timed  # type: ignore[attr-defined]
    try:
        for m, mode in enumerate(("hybrid", "vector", "keyword")):
            times = []
            for i in range(repeats):
                text = query_texts[(m * repeats + i) % len(query_texts)]
                t = time.perf_counter()
                await ops.search(reading, text, top_k=10, mode=mode)
                times.append((time.perf_counter() - t) * 1000)
            out[mode] = {"p50_ms": round(statistics.median(times), 2),
                         "p95_ms": round(pct(times, 0.95), 2)}
    finally:
        ops._vector_stage = real  # type: ignore[attr-defined]
    out["vector_stage_in_calls"] = {"p50_ms": round(statistics.median(in_calls), 2),
                                    "p95_ms": round(pct(in_calls, 0.95), 2)}
    return out


def plot(results: list[dict], path: Path, startup: Path | None = None) -> None:
    """Latency per stage (p50 solid, p95 dashed) and start-up time against corpus size,
    log scales; start-up from bench/startup_scale.py's results when `startup` exists."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["chunks"] for r in results]
    fig, (ax, up) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120,
                                 gridspec_kw={"width_ratios": [3, 2]})
    lines = (("hybrid call", "hybrid", "C0"), ("keyword call", "keyword", "C1"),
             ("vector call", "vector", "C2"))
    for label, mode, colour in lines:
        ax.plot(sizes, [r[mode]["p50_ms"] for r in results], "o-", color=colour,
                label=f"{label} p50")
        ax.plot(sizes, [r[mode]["p95_ms"] for r in results], "o--", color=colour,
                label=f"{label} p95")
    ax.plot(sizes, [r["vector_stage_p50_ms"] for r in results], "s-", color="C3",
            label="vector stage after an exact scan p50")
    ax.plot(sizes, [r["vector_stage_p95_ms"] for r in results], "s--", color="C3",
            label="vector stage after an exact scan p95")
    if all("vector_stage_in_calls" in r for r in results):
        ax.plot(sizes, [r["vector_stage_in_calls"]["p50_ms"] for r in results], "^-",
                color="C4", label="vector stage in calls p50")
        ax.plot(sizes, [r["vector_stage_in_calls"]["p95_ms"] for r in results], "^--",
                color="C4", label="vector stage in calls p95")
    ax.plot(sizes, [r["numpy_scan_p50_ms"] for r in results], "k:",
            label="numpy float32 scan p50")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the index")
    ax.set_ylabel("ms (search calls include the query embedding)")
    ax.set_title("Search latency")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_ylim(top=ax.get_ylim()[1] * 12)  # room above the lines for the legend
    ax.legend(fontsize=6.5, ncol=2, loc="upper left")
    up.plot(sizes, [r["load_s"] for r in results], "o-", color="C0",
            label="open + model load, in process")
    if startup is not None and startup.exists():
        rows = json.loads(startup.read_text())["results"]
        for code, colour, which in (("current", "C2", "this"), ("baseline", "C3", "previous")):
            got = [(r["chunks"], r[code]["first_search_s"]) for r in rows if code in r]
            if got:
                up.plot(*zip(*got, strict=True), "s-", color=colour,
                        label=f"spawn to first search ({which} commit)")
    up.set_xscale("log")
    up.set_yscale("log")
    up.set_xlabel("chunks in the index")
    up.set_ylabel("seconds")
    up.set_title("Start-up")
    up.grid(True, which="both", alpha=0.3)
    up.legend(fontsize=7)
    fig.suptitle("PocketMCP at scale (2 cores, 24 GB)")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,50000,200000,1000000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-docs", type=int, default=1500,
                        help="SciFact abstracts embedded for the base vectors")
    parser.add_argument("--base-index", type=Path,
                        help="take the base vectors from this index instead of embedding")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--keep", type=Path, help="keep the index files in this folder")
    parser.add_argument("--startup", type=Path,
                        help="bench/startup_scale.py's results for the plot's start-up panel "
                             "(default: OUT/startup_scale.json)")
    args = parser.parse_args()
    name = "index" if args.base_index else str(args.base_docs)
    cache = ROOT / ".cache" / f"bench-base-{name}.npz"
    base, texts, queries, query_texts = base_vectors(cache, args.base_docs, args.base_index)
    results = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-search-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in (int(s) for s in args.sizes.split(",")):
            vectors, text_of = synthesise(base, n, seed=n)
            db = folder / f"search-{n}.db"
            if not db.exists():
                t = time.perf_counter()
                build_index(db, vectors, text_of, texts)
                print(f"built {n} chunks in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            prepare(db, vectors.shape[1])
            row = {"chunks": n, **anyio.run(measure, db, vectors, queries, query_texts,
                                             args.queries)}
            results.append(row)
            print(json.dumps(row), flush=True)
            if not args.keep:
                for suffix in ("", "-wal", "-shm", ".writer.lock"):
                    Path(str(db) + suffix).unlink(missing_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "search.json").write_text(json.dumps({
        "cpus": os.cpu_count(), "queries": args.queries, "results": results}, indent=2) + "\n")
    plot(results, args.out / "search.png", args.startup or args.out / "startup_scale.json")
    print(f"wrote {args.out / 'search.json'} and {args.out / 'search.png'}")


if __name__ == "__main__":
    main()
