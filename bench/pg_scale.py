"""Postgres + pgvector at scale beside SQLite, in one run: a prebuilt SQLite bench index
copied into Postgres with binary COPY, its indexes built after the load, then both stores
asked the same queries through their own code, alternating.

Building a large index through the writer goes at about 100 chunks/s on Postgres (hours for
a million chunks), so the rows are copied from an index bench/search.py built (SciFact chunk
embeddings mixed in pairs, with their text): documents and chunks with binary COPY, their
words as SQLite's FTS5 holds them (store/pg/tokens.py), then the GIN index, then the HNSW
index (m 16, ef_construction 64, maintenance_work_mem and parallel workers as given), each
timed. The source file is opened immutable: nothing is written beside it.

Measured per store, on real SciFact claims (embedded by the model) as queries:
- the vector stage p50/p95 and recall@10 against exact float32 search (numpy), for the
  SQLite store's vector file and for HNSW at each `--ef` (hnsw.ef_search, LIMIT 10), and
  the Postgres store's own call as a search makes it (the nearest `depth` = 200 chunks,
  whose first 10 are compared);
- filtered vector searches (a random `--filtered` share of the documents allowed, as a
  library or a metadata filter allows them): recall@10 and latency with pgvector's
  iterative scans off, relaxed_order and strict_order;
- the keyword stage p50/p95 (FTS5's BM25 on both: SQLite's own, Postgres's over a tsvector).

    .venv/bin/python bench/pg_scale.py --source ../benchdata/search-200000.db \\
        --pgdata ../pgbench

Results: bench/results/pg_scale.json.

Figures on: docs/postgres.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import data
import numpy as np
from common import parser_for, postgres, summary, timed, write_results


def source_rows(path: Path) -> tuple[Any, np.ndarray, np.ndarray]:
    """The source index (immutable, read-only) and every chunk's (chunk id, vector)."""
    from pocketmcp.store.sqlite.connect import _load_vec, sqlite_module

    conn = sqlite_module().connect(path.resolve().as_uri() + "?mode=ro&immutable=1", uri=True)
    _load_vec(conn)
    n = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    ids = np.zeros(n, np.int64)
    vectors = np.zeros((n, 384), np.float32)
    for i, (chunk_id, blob) in enumerate(conn.execute(
            "SELECT chunk_id, embedding FROM vec_chunks ORDER BY chunk_id")):
        ids[i] = chunk_id
        vectors[i] = np.frombuffer(blob, np.float32)
    return conn, ids, vectors


def load(url: str, schema: str, src: Any, ids: np.ndarray, vectors: np.ndarray,
         workers: int, build_limit: float | None = None, graph: str = "") -> dict[str, float]:
    """Copy the source's rows into a new Postgres index; seconds per step. With
    `build_limit`, the HNSW build is stopped after that many seconds and its whole time
    estimated from the share of rows it had inserted into the graph."""
    import psycopg
    from pgvector.psycopg import register_vector

    from pocketmcp.core.identity import Identity
    from pocketmcp.core.secret import Secret
    from pocketmcp.store.pg import schema as pg_schema
    from pocketmcp.store.pg.place import PgPlace
    from pocketmcp.store.pg.writes import PgWriter

    PgWriter(PgPlace(Secret(url), schema), Identity(model=data.MODEL, dim=data.DIM)).close()
    row_of = {int(c): i for i, c in enumerate(ids)}
    out: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True,
                         options=f"-c search_path={schema},public") as conn:
        register_vector(conn)
        conn.execute(b"DROP INDEX chunks_embedding")
        conn.execute(b"DROP INDEX chunks_tsv")
        started = time.perf_counter()
        docs = src.execute(
            "SELECT doc_id, external_id, source, uri, title, library, metadata, content, "
            "content_sha256, size_bytes, mtime_ns, chunk_count, created_at, updated_at "
            "FROM documents ORDER BY doc_id").fetchall()
        text_of = {d[0]: (d[4], d[7]) for d in docs}
        with conn.cursor() as cur, cur.copy(
                b"COPY documents(doc_id, external_id, source, uri, title, library, metadata, "
                b"content, content_sha256, size_bytes, mtime_ns, chunk_count, created_at, "
                b"updated_at) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "text", "text", "text", "text", "jsonb", "text",
                            "text", "int8", "int8", "int4", "text", "text"])
            for d in docs:
                copy.write_row(d)
        out["copy_documents_s"] = time.perf_counter() - started
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                b"COPY chunks(chunk_id, doc_id, idx, start_off, end_off, tokens, text_sha256, "
                b"section, title, words, embedding) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int8", "int4", "int4", "int4", "int4", "text", "text",
                            "text", "text", "vector"])
            for row in src.execute("SELECT chunk_id, doc_id, idx, start_off, end_off, tokens, "
                                   "text_sha256, section FROM chunks ORDER BY chunk_id"):
                title, content = text_of[row[1]]
                copy.write_row((*row, title, content[row[3]:row[4]],
                                vectors[row_of[row[0]]]))
        out["copy_chunks_s"] = time.perf_counter() - started
        for table, column in (("documents", "doc_id"), ("chunks", "chunk_id")):
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                         f"(SELECT max({column}) FROM {table}))".encode())
        started = time.perf_counter()
        pg_schema.fill_chunk_terms(conn)  # the words as SQLite's FTS5 holds them
        out["terms_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(b"CREATE INDEX chunks_tsv ON chunks USING gin (tsv)")
        out["gin_s"] = time.perf_counter() - started
        conn.execute(f"SET max_parallel_maintenance_workers = {workers}".encode())
        if build_limit is not None:
            out |= partial_build(url, schema, conn, build_limit, graph)
            return {k: round(v, 3) for k, v in out.items()}
        started = time.perf_counter()
        conn.execute(b"CREATE INDEX chunks_embedding ON chunks "
                     b"USING hnsw (embedding public.vector_cosine_ops)" + graph.encode())
        out["hnsw_s"] = time.perf_counter() - started
        conn.execute(b"VACUUM ANALYZE documents")
        conn.execute(b"VACUUM ANALYZE chunks")
        sizes = conn.execute(
            b"SELECT pg_relation_size('chunks_embedding'), pg_total_relation_size('chunks')"
        ).fetchone()
        out["hnsw_mb"] = sizes[0] / 2**20
        out["chunks_total_mb"] = sizes[1] / 2**20
    return {k: round(v, 1) for k, v in out.items()}


def partial_build(url: str, schema: str, conn: Any, limit: float,
                  graph: str) -> dict[str, float]:
    """Start the HNSW build on `conn`, watch its progress from another connection for
    `limit` seconds, then cancel it: the rows it had put into the graph, and the time the
    whole build would take at the rate it went (graph inserts slow down as the graph grows,
    so this is a lower bound)."""
    import threading

    import psycopg

    failure: list[BaseException] = []

    def build() -> None:
        try:
            conn.execute(b"CREATE INDEX chunks_embedding ON chunks "
                         b"USING hnsw (embedding public.vector_cosine_ops)" + graph.encode())
        except psycopg.errors.QueryCanceled:
            pass
        except BaseException as exc:  # reported below
            failure.append(exc)

    pid = conn.info.backend_pid
    rows = int(conn.execute(b"SELECT count(*) FROM chunks").fetchone()[0])
    thread = threading.Thread(target=build)
    started = time.perf_counter()
    thread.start()
    done = total = 0
    seen: list[tuple[float, int]] = []
    with psycopg.connect(url, autocommit=True) as watch:
        while thread.is_alive() and time.perf_counter() - started < limit:
            row = watch.execute(b"SELECT phase, tuples_done, tuples_total FROM "
                                b"pg_stat_progress_create_index WHERE pid = %s",
                                (pid,)).fetchone()
            if row is not None:
                done, total = int(row[1] or 0), int(row[2] or 0) or rows  # pgvector: 0
                seen.append((time.perf_counter() - started, done))
                print(f"hnsw build: {row[0]}, {done}/{total} rows after "
                      f"{seen[-1][0]:.0f} s", flush=True)
            time.sleep(10)
        if thread.is_alive():
            watch.execute(b"SELECT pg_cancel_backend(%s)", (pid,))
    thread.join()
    if failure:
        raise failure[0]
    elapsed = time.perf_counter() - started
    rate = done / elapsed if elapsed else 0.0
    return {"hnsw_partial_s": elapsed, "hnsw_rows_done": done, "hnsw_rows_total": total,
            "hnsw_rows_per_s": rate,
            "hnsw_estimated_s": total / rate if rate else float("nan")}


def figures(times: list[float], hits: int, n: int) -> dict[str, float]:
    return {**summary(times), "recall@10": round(hits / (10 * n), 4)}


async def measure(url: str, schema: str, source: Path, ids: np.ndarray, vectors: np.ndarray,
            doc_of: np.ndarray, queries: np.ndarray, texts: list[str], efs: list[int],
            share: float) -> dict[str, Any]:
    """Both stores, query by query, alternating."""
    import psycopg
    from pgvector.psycopg import register_vector

    from pocketmcp.core.secret import Secret
    from pocketmcp.search.fuse import DEFAULT_PARAMS
    from pocketmcp.search.retrieve import candidates_for
    from pocketmcp.store.pg.place import PgPlace
    from pocketmcp.store.sqlite.place import SqlitePlace

    sqlite = SqlitePlace(source, source.parent / "databases").reader(384)
    postgres = PgPlace(Secret(url), schema).reader(384)
    await sqlite.open_vectors()
    conn = psycopg.connect(url, autocommit=True, options=f"-c search_path={schema},public")
    register_vector(conn)
    rng = np.random.default_rng(7)
    all_docs = np.unique(doc_of)
    allowed = np.sort(rng.choice(all_docs, max(1, int(len(all_docs) * share)), replace=False))
    mask = np.isin(doc_of, allowed)
    allowed_list = allowed.tolist()
    modes = ["off", "relaxed_order", "strict_order"]
    times: dict[str, list[float]] = {}
    hits: dict[str, int] = {}

    def note(key: str, got: list[int], ms: float, exact: set[int]) -> None:
        times.setdefault(key, []).append(ms)
        hits[key] = hits.get(key, 0) + len(set(got[:10]) & exact)

    def pg(q: np.ndarray, ef: int, where: str = "", args: tuple[Any, ...] = (),
           scan: str = "off") -> list[int]:
        with conn.transaction():
            conn.execute(b"SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
            conn.execute(f"SET LOCAL hnsw.iterative_scan = {scan}".encode())
            rows = conn.execute(
                f"SELECT chunk_id FROM chunks {where} ORDER BY embedding <=> %s "
                "LIMIT 10".encode(), (*args, q)).fetchall()
        return [r[0] for r in rows]

    for n, q in enumerate(queries):
        scores = vectors @ q
        exact = set(ids[np.argpartition(-scores, 10)[:10]].tolist())
        scores_f = np.where(mask, scores, -np.inf)
        exact_f = set(ids[np.argpartition(-scores_f, 10)[:10]].tolist())

        def lite(reader: Any, q: np.ndarray = q) -> list[int]:
            found, _, _ = sqlite.nearest(reader, q, 10,
                                         candidates_for(sqlite.live, DEFAULT_PARAMS), None)
            return list(found.tolist())

        def lite_f(reader: Any, q: np.ndarray = q) -> list[int]:
            found, _, _ = sqlite.nearest(reader, q, 10, candidates_for(
                sqlite.live, DEFAULT_PARAMS), allowed_list)
            return list(found.tolist())

        def store(reader: Any, q: np.ndarray = q, allowed: list[int] | None = None
                  ) -> list[int]:  # as a search calls it: `depth` nearest, then the top 10
            found, _, _ = postgres.nearest(reader, q, DEFAULT_PARAMS.depth, 0, allowed)
            return list(found[:10].tolist())

        note("sqlite", *await sqlite.run(lambda r: timed(lambda: lite(r))), exact)
        note("pg_store", *await postgres.run(lambda r: timed(lambda: store(r))), exact)
        for ef in efs:
            note(f"pg_ef{ef}", *timed(lambda ef=ef, q=q: pg(q, ef)), exact)
        if share > 0:
            note("pg_store_filtered", *await postgres.run(
                lambda r: timed(lambda: store(r, allowed=allowed_list))), exact_f)
            note("sqlite_filtered", *await sqlite.run(lambda r: timed(lambda: lite_f(r))),
                 exact_f)
        for ef in efs if share > 0 else []:
            for scan in modes:
                note(f"pg_filtered_ef{ef}_{scan}", *timed(
                    lambda ef=ef, scan=scan, q=q: pg(q, ef, "WHERE doc_id = ANY(%s)",
                                                (allowed_list,), scan)), exact_f)
        for key, index in (("keyword_sqlite", sqlite), ("keyword_pg", postgres)):
            def words(reader: Any, t: str = texts[n], total: int = index.live
                      ) -> tuple[float, int]:
                started = time.perf_counter()
                found = reader.keyword_stage(t, DEFAULT_PARAMS.depth, None, title_weight=1.0,
                                             total=total, documents=False)
                return (time.perf_counter() - started) * 1000, len(found.keyword)
            ms, got = await index.run(words)
            times.setdefault(key, []).append(ms)
            hits[key] = hits.get(key, 0) + got
    conn.close()
    sqlite.close()
    postgres.close()
    out: dict[str, Any] = {"filtered_share": share, "allowed_docs": len(allowed_list),
                           "allowed_chunks": int(mask.sum())}
    for key, values in times.items():
        out[key] = figures(values, hits.get(key, 0), len(queries))
        if key.startswith("keyword"):  # chunks found per query, not a recall
            out[key]["chunks_found_mean"] = out[key].pop("recall@10") * 10
    return out


def main() -> None:
    parser = parser_for(__doc__, "pg_scale")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--pgdata", type=Path, required=True,
                        help="a new folder for the Postgres data (deleted at the end)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef", default="40,100,200,400")
    parser.add_argument("--filtered", type=float, default=0.1,
                        help="the share of documents filtered searches allow (0: none made)")
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--workers", type=int, default=1,
                        help="parallel maintenance workers beside the leader (2 cores: 1)")
    parser.add_argument("--m", type=int, default=16, help="HNSW links per node")
    parser.add_argument("--ef-construction", type=int, default=64,
                        help="HNSW candidates per insert while building")
    parser.add_argument("--build-limit", type=float,
                        help="stop the HNSW build after this many seconds, estimate its whole "
                             "time from its progress, and measure no searches")
    args = parser.parse_args()
    if args.pgdata.exists():
        sys.exit(f"{args.pgdata} exists: give a new folder")
    _, _, queries, query_texts = data.base_vectors()
    queries, query_texts = queries[:args.queries], query_texts[:args.queries]
    src, ids, vectors = source_rows(args.source)
    doc_of = np.zeros(len(ids), np.int64)
    for i, (doc_id,) in enumerate(src.execute("SELECT doc_id FROM chunks ORDER BY chunk_id")):
        doc_of[i] = doc_id
    print(f"{len(ids)} chunks read from {args.source}", flush=True)
    settings = {"maintenance_work_mem": args.maintenance_work_mem,
                "max_parallel_maintenance_workers": str(args.workers), "max_wal_size": "8GB"}
    with postgres(args.pgdata, **settings) as url:
        graph = f" WITH (m = {args.m}, ef_construction = {args.ef_construction})"
        build = load(url, "bench", src, ids, vectors, args.workers, args.build_limit, graph)
        build |= {"m": args.m, "ef_construction": args.ef_construction}
        print(json.dumps(build), flush=True)
        result = {}
        if args.build_limit is None:
            result = anyio.run(measure, url, "bench", args.source, ids, vectors, doc_of,
                               queries, query_texts, [int(e) for e in args.ef.split(",")],
                               args.filtered)
    result = {"chunks": len(ids), "source": str(args.source), "queries": len(queries),
              "build": build, **result}
    print(json.dumps(result, indent=1))
    write_results(args, result)


if __name__ == "__main__":
    main()
