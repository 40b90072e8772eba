"""Indexing throughput and memory: the whole pipeline against the bare model.

Part 1 (throughput): a folder of SciFact abstracts is indexed by `pocketmcp index` in a child
process; the same chunks are then embedded by bare fastembed in this process with the same
batch size. The ratio pipeline/bare says how much the pipeline adds to the model's own cost.

Part 2 (memory): `pocketmcp index` on folders of short notes of growing size; the child's
peak RSS shows whether memory grows with the folder.

Part 3 (no-op): `pocketmcp index` again on a folder of short notes already indexed, nothing
changed: wall time from spawn to exit (process start included) and CPU, p50 over the runs;
then ten notes deleted, indexed, restored unchanged and indexed again: the chunks embedded
again. With `--other`, that checkout indexes the same notes into its own index, and the
runs of the two alternate.

    .venv/bin/python bench/ingest.py                   # defaults: 600 abstracts; 1k and 10k notes
    .venv/bin/python bench/ingest.py --files 1000 --memory-sizes 1000,10000,20000
    .venv/bin/python bench/ingest.py --other ../prev --memory-sizes ''   # against another checkout
    .venv/bin/python bench/ingest.py --files 0 --memory-sizes '' --other ../prev  # no-op only

With `--other CHECKOUT`, part 1 also indexes the folder with that checkout's code (its own
.venv), alternating with this one's, and reports both rates and their ratio (this / other).

Results: bench/results/ingest.json (scripts/results_tables.py puts it in docs/benchmarks.md).

Figures on: docs/benchmarks.md (the indexing table).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import data
from common import Ran, parser_for, run_pocketmcp, venv_python, write_results
from common import summary as spread


def write_notes(folder: Path, n: int) -> None:
    docs = data.corpus()
    for i in range(n):
        doc = docs[i % len(docs)]
        sub = folder / f"d{i // 500:03}"
        sub.mkdir(exist_ok=True)
        (sub / f"n{i}.md").write_text(f"# Note {i}\n\n{doc['title']}\n", encoding="utf-8")


def run_index(folder: Path, db: Path, python: Path | str = sys.executable) -> Ran:
    """`pocketmcp index` of `folder` in a child (of `python`): its summary, time and memory."""
    env = {**os.environ, "WATCH_DIR": str(folder), "SQLITE_PATH": str(db), "LOG_LEVEL": "error"}
    return run_pocketmcp("index", "--json", "--progress", "off", env=env, python=python)


def bare_chunks_per_s(folder: Path, batch_size: int) -> tuple[int, float]:
    """Chunk every file like the pipeline, then time bare fastembed on the chunks."""
    environ = {k: v for k, v in os.environ.items() if k.isupper()}
    embedder = data.local_embedder(environ)
    texts = list(data.pieces((path.read_text(encoding="utf-8")
                              for path in sorted(folder.rglob("*.md"))), embedder, environ))
    model = embedder._documents_model()  # loaded on first use
    started = time.perf_counter()
    for _ in model.embed(texts, batch_size=batch_size):
        pass
    elapsed = time.perf_counter() - started
    return len(texts), len(texts) / elapsed


def main() -> None:
    parser = parser_for(__doc__, "ingest")
    parser.add_argument("--files", type=int, default=600, help="abstracts for part 1")
    parser.add_argument("--repeats", type=int, default=2,
                        help="alternating runs of pipeline and bare model (best is kept)")
    parser.add_argument("--memory-sizes", default="1000,10000",
                        help="comma-separated folder sizes (notes) for part 2")
    parser.add_argument("--other", type=Path, default=None,
                        help="another checkout (with its .venv) to index the abstracts too")
    parser.add_argument("--noop-files", type=int, default=1000,
                        help="notes for part 3, the no-op run (0: skip it)")
    parser.add_argument("--noop-runs", type=int, default=5,
                        help="no-op runs of each checkout, alternating")
    args = parser.parse_args()
    from pocketmcp.config import load

    batch = load({}, environ={k: v for k, v in os.environ.items() if k.isupper()}).embed.batch_size
    results: dict = {"batch_size": batch}

    with tempfile.TemporaryDirectory(prefix="pocketmcp-bench-") as tmp:
        base = Path(tmp)
        if args.noop_files:
            results["noop"] = noop(base, args.noop_files, args.noop_runs, args.other)
        if args.files:
            throughput(base, args, batch, results)
        memory(base, args, results)
    write_results(args, results)


def noop(base: Path, files: int, runs: int, other: Path | None) -> dict:
    """`index` of `files` notes already indexed, nothing changed: wall (spawn to exit) and
    CPU seconds of each run, this checkout's and `other`'s alternating."""
    notes = base / "noop-notes"
    notes.mkdir()
    write_notes(notes, files)
    pythons = {"this": Path(sys.executable)}
    if other is not None:
        pythons["other"] = venv_python(other)
    walls: dict[str, list[float]] = {name: [] for name in pythons}
    cpus: dict[str, list[float]] = {name: [] for name in pythons}
    for name, python in pythons.items():  # each its own index (their schemas may differ)
        run_index(notes, base / f"noop-{name}.db", python)
    for _ in range(runs):
        for name, python in pythons.items():
            ran = run_index(notes, base / f"noop-{name}.db", python)
            assert ran.answer["unchanged"] == files and ran.answer["chunks_embedded"] == 0
            walls[name].append(ran.wall_s)
            cpus[name].append(ran.cpu_s)
    out: dict = {"files": files, "runs": runs}
    # Ten notes deleted, indexed, put back unchanged, indexed: what the model embeds again.
    moved = sorted(notes.rglob("*.md"))[:10]
    for name, python in pythons.items():
        for path in moved:
            path.rename(base / path.name)
        gone = run_index(notes, base / f"noop-{name}.db", python).answer
        for path in moved:
            (base / path.name).rename(path)
        back = run_index(notes, base / f"noop-{name}.db", python).answer
        out.setdefault("restored", {})[name] = {
            "files": len(moved), "removed": gone["removed"], "added": back["added"],
            "chunks_embedded": back["chunks_embedded"], "chunks_reused": back["chunks_reused"]}
        print(f"{len(moved)} notes deleted and restored ({name}): {back['chunks_embedded']} "
              f"chunks embedded again, {back['chunks_reused']} reused")
    for name in pythons:
        out[name] = {**spread(walls[name], "s"), "min_s": round(min(walls[name]), 2),
                     **{f"cpu_{k}": v for k, v in spread(cpus[name], "s").items()},
                     "wall_runs": [round(w, 2) for w in walls[name]]}
        print(f"no-op index of {files} notes ({name}): wall p50 {out[name]['p50_s']} s, min "
              f"{out[name]['min_s']} s; CPU p50 {out[name]['cpu_p50_s']} s")
    if other is not None:
        out["other"]["commit"] = subprocess.run(
            ["git", "-C", str(other), "rev-parse", "--short", "HEAD"], capture_output=True,
            text=True).stdout.strip() or None
        out["ratio_p50"] = round(out["this"]["p50_s"] / out["other"]["p50_s"], 3)
    return out


def throughput(base: Path, args, batch: int, results: dict) -> None:
    """Part 1: the pipeline's rate against bare fastembed's on the same chunks."""
    folder = data.abstracts(base / "abstracts", args.files)
    # Alternate the two, twice, and keep each one's best: noise on a shared machine only
    # ever slows a run down.
    pipe_rates, bare_rates, peaks, other_rates = [], [], [], []
    for attempt in range(args.repeats):
        db = base / f"a{attempt}.db"
        ran = run_index(folder, db)
        summary = ran.answer
        pipe_rates.append(summary["chunks_embedded"] / summary["pipeline_s"])
        peaks.append(ran.peak_rss_mib)
        if args.other is not None:
            theirs = run_index(folder, base / f"o{attempt}.db", venv_python(args.other))
            other_rates.append(theirs.answer["chunks_embedded"]
                               / theirs.answer["pipeline_s"])
        chunks, rate = bare_chunks_per_s(folder, batch)
        bare_rates.append(rate)
    pipe_rate, bare_rate, peak = max(pipe_rates), max(bare_rates), max(peaks)
    if chunks != summary["chunks_embedded"]:
        print(f"note: bare run embedded {chunks} chunks, pipeline {summary['chunks_embedded']}")
    results["throughput"] = {
        "files": args.files, "chunks": summary["chunks_embedded"],
        "pipeline_s": summary["pipeline_s"], "pipeline_chunks_per_s": round(pipe_rate, 2),
        "bare_chunks_per_s": round(bare_rate, 2), "ratio": round(pipe_rate / bare_rate, 3),
        "pipeline_runs": [round(r, 2) for r in pipe_rates],
        "bare_runs": [round(r, 2) for r in bare_rates],
        "peak_rss_mib": round(peak, 1),
    }
    if other_rates:
        results["throughput"]["other"] = {
            "checkout": str(args.other), "pipeline_chunks_per_s": round(max(other_rates), 2),
            "pipeline_runs": [round(r, 2) for r in other_rates],
            "ratio": round(pipe_rate / max(other_rates), 3)}
        print(f"other checkout: pipeline {max(other_rates):.1f} chunks/s; this / other "
              f"{pipe_rate / max(other_rates):.3f}")
    print(f"throughput: {args.files} files, {summary['chunks_embedded']} chunks; pipeline "
          f"{pipe_rate:.1f} chunks/s, bare fastembed {bare_rate:.1f} chunks/s, ratio "
          f"{pipe_rate / bare_rate:.3f}; peak RSS {peak:.0f} MiB")


def memory(base: Path, args, results: dict) -> None:
    """Part 2: peak RSS of `index` on folders of growing size."""
    results["memory"] = []
    for n in (int(x) for x in args.memory_sizes.split(",") if x.strip()):
        notes = base / f"notes-{n}"
        notes.mkdir()
        write_notes(notes, n)
        ran = run_index(notes, base / f"n{n}.db")
        summary, peak = ran.answer, ran.peak_rss_mib
        row = {"files": n, "chunks": summary["chunks_embedded"],
               "pipeline_s": summary["pipeline_s"], "peak_rss_mib": round(peak, 1),
               "files_per_s": round(n / summary["pipeline_s"], 1)}
        results["memory"].append(row)
        print(f"memory: {n} files -> peak RSS {peak:.0f} MiB "
              f"({row['files_per_s']} files/s)")


if __name__ == "__main__":
    main()
