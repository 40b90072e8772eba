"""Keyword search from the first scan, vectors following: how soon a new folder is findable,
how soon every chunk has its vector against the previous code, and search quality once they
all have.

Part 1 (findable): a generated folder of notes (a few paragraphs each, a unique marker word
in each) is given to `pocketmcp watch` in a child process; this process polls the index with
the keyword retriever for the marker of the last file the scan reaches, and records the
seconds from the child's start until it is found, until the first scan is recorded done, and
how many chunks have their vectors by the end of the follow window (their rate gives the
projected time until all have).

Part 2 (complete, and quality): a subset of SciFact (the abstracts relevant to its first
claims, then others up to `--docs`) is indexed and measured by `pocketmcp eval` with this
checkout and with `--other` (the previous code, its own .venv), alternating. `eval` returns
its index once every chunk has its vector, so its index seconds compare the time until
complete; nDCG@10 and recall@100 per mode compare quality with every vector in.

    .venv/bin/python bench/keywords_first.py                        # 10,000 notes; 400 docs
    .venv/bin/python bench/keywords_first.py --notes 2000 --docs 200 --other ../r

Results: bench/results/keywords_first.json.

Figures on: docs/indexing.md.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import data
from common import (
    cpu_s,
    load_1min,
    parser_for,
    run_pocketmcp,
    stop,
    venv_python,
    write_results,
)

PER_FOLDER = 500


def write_notes(folder: Path, n: int, seed: int = 7) -> str:
    """`n` notes of three to five paragraphs, in folders of PER_FOLDER; the relative path
    of the last one a scan reaches (folders and files are walked in name order)."""
    docs = data.corpus()
    rng = random.Random(seed)
    last = ""
    for i in range(n):
        sub = folder / f"d{i // PER_FOLDER:03}"
        sub.mkdir(exist_ok=True)
        picks = [docs[rng.randrange(len(docs))] for _ in range(rng.randint(3, 5))]
        paragraphs = [f"Marker kwmark{i:05}z names this note."] + [
            d["text"][:rng.randint(300, 700)] for d in picks]
        (sub / f"n{i:05}.md").write_text(f"# Note {i}: {picks[0]['title']}\n\n"
                                         + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
        last = f"d{i // PER_FOLDER:03}/n{i:05}.md"
    return last


def _probe(db: Path, marker: str, last: str) -> dict[str, Any]:
    """What the index answers now: whether a keyword search for `marker` finds `last`,
    whether the first scan is done, and its chunk counts."""
    from pocketmcp.errors import StoreError
    from pocketmcp.store.sqlite.queries import SqliteReader

    out: dict[str, Any] = {"found": False, "scan_done": False, "chunks": 0, "waiting": 0}
    if not db.exists():
        return out
    try:
        reader = SqliteReader(db)
    except StoreError:
        return out
    try:
        with reader.snapshot():
            found = reader.keyword_stage(marker, 5, None, title_weight=1.0, total=1,
                                         documents=False)
            docs = [reader.document(d) for d in set(found.doc_of.values())]
            out["found"] = any(d is not None and d.external_id == "file:" + last for d in docs)
            recorded = reader.query("SELECT value FROM meta WHERE key = 'first_scan'")
            out["scan_done"] = bool(recorded) and recorded[0][0] == "done"
            counts = reader.counts()
            out["chunks"], out["waiting"] = counts["chunks"], counts.get("waiting", 0)
    except StoreError:  # not made, or not migrated yet
        pass
    finally:
        reader.close()
    return out


def findable(folder: Path, last: str, db: Path, follow_s: float, timeout_s: float,
             code: Path | None = None) -> dict[str, Any]:
    """Part 1 with this checkout (or the one at `code`, run with this interpreter):
    `pocketmcp watch` until the last file is found by keywords, then `follow_s` seconds more
    of embedding."""
    env = {**os.environ, "WATCH_DIR": str(folder), "SQLITE_PATH": str(db), "LOG_LEVEL": "error"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    marker = "kwmark" + Path(last).stem[1:] + "z"
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "pocketmcp", "watch"], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=code)
    result: dict[str, Any] = {}
    try:
        while time.perf_counter() - started < timeout_s:
            now = _probe(db, marker, last)
            elapsed = time.perf_counter() - started
            if now["found"] and "found_s" not in result:
                result["found_s"] = round(elapsed, 2)
                # CPU seconds the server used until then (every thread): what a quiet
                # machine's wall time is made of, whatever else ran beside it.
                result["found_cpu_s"] = cpu_s(child.pid)
                result["load_1min_at_found"] = load_1min()
            if now["scan_done"] and "scan_done_s" not in result:
                result["scan_done_s"] = round(elapsed, 2)
                result["chunks"] = now["chunks"]
                result["vectors_at_scan_done"] = now["chunks"] - now["waiting"]
            if "found_s" in result and "scan_done_s" in result:
                break
            if child.poll() is not None:
                raise SystemExit("pocketmcp watch ended early")
            time.sleep(0.2)
        else:
            raise SystemExit(f"the last file was not found within {timeout_s} s")
        time.sleep(follow_s)
        now = _probe(db, marker, last)
        followed = round(time.perf_counter() - started - result["scan_done_s"], 2)
        done = now["chunks"] - now["waiting"] - result["vectors_at_scan_done"]
        result.update(followed_s=followed, vectors_in_follow=done,
                      vectors_per_s=round(done / followed, 2) if followed > 0 else None)
        if done > 0:
            result["projected_all_vectors_s"] = round(
                result["scan_done_s"] + now["waiting"] / (done / followed), 1)
    finally:
        stop(child, 60)
    return result


def scifact_subset(target: Path, docs: int) -> dict[str, int]:
    """A BEIR folder of SciFact's claims whose relevant abstracts all fit in `docs`
    abstracts (those abstracts first, then others in corpus order)."""
    relevant = {q: sorted(set(d)) for q, d in data.qrels().items()}
    keep: dict[str, None] = {}
    chosen: list[str] = []
    for query, wanted in relevant.items():
        if len(keep) + len(set(wanted) - set(keep)) > docs // 2:
            break
        chosen.append(query)
        keep.update(dict.fromkeys(wanted))
    rows = data.corpus()
    picked = [r for r in rows if r["_id"] in keep]
    picked += [r for r in rows if r["_id"] not in keep][:docs - len(picked)]
    data.beir_part(target, chosen, picked, relevant)
    return {"documents": len(picked), "queries": len(chosen)}


def evaluate(python: Path | str, dataset: Path, cwd: Path) -> dict[str, Any]:
    """`pocketmcp eval` by `python` (its checkout's code): the report, and the time taken."""
    ran = run_pocketmcp("eval", str(dataset), "--json", env={**os.environ, "LOG_LEVEL": "error"},
                        python=python, cwd=cwd)
    report = ran.answer
    return {"index": report["index"], "chunks": report["chunks"],
            "wall_s": round(ran.wall_s, 1), "cpu_s": round(ran.cpu_s, 1),
            "modes": {m: {k: round(v, 4) for k, v in values.items() if k != "ms_per_query"}
                      for m, values in report["modes"].items()}}


def main() -> None:
    parser = parser_for(__doc__, "keywords_first")
    parser.add_argument("--notes", type=int, default=10000, help="notes for part 1 (0: skip)")
    parser.add_argument("--follow", type=float, default=60.0,
                        help="seconds of embedding watched after the first scan (part 1)")
    parser.add_argument("--docs", type=int, default=400,
                        help="SciFact abstracts for part 2 (0: skip)")
    parser.add_argument("--other", type=Path, default=Path(__file__).resolve().parents[2] / "r",
                        help="the previous code's checkout, with its .venv (part 2)")
    parser.add_argument("--base", type=Path, default=None,
                        help="a checkout of earlier code whose part 1 is measured too, "
                             "alternating with this one (same interpreter and packages)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="alternating runs of each code in part 2, and in part 1 with --base "
                             "(the best is kept)")
    args = parser.parse_args()
    results: dict[str, Any] = {"load_1min_before": load_1min()}
    with tempfile.TemporaryDirectory(prefix="pocketmcp-kwfirst-") as tmp:
        base = Path(tmp)
        if args.notes:
            folder = base / "notes"
            folder.mkdir()
            last = write_notes(folder, args.notes)
            runs: list[dict[str, Any]] = []
            before: list[dict[str, Any]] = []
            for i in range(args.repeats if args.base is not None else 1):
                if args.base is not None:  # alternating: the earlier code, then this one
                    before.append(findable(folder, last, base / f"base{i}.db", args.follow,
                                           timeout_s=900, code=args.base))
                runs.append(findable(folder, last, base / f"this{i}.db", args.follow,
                                     timeout_s=900))
            part = min(runs, key=lambda r: r["found_cpu_s"])
            if before:
                least = min(before, key=lambda r: r["found_cpu_s"])
                results["findable_base"] = {
                    "code": str(args.base), "runs": before, "this_runs": runs,
                    "cpu_ratio": round(least["found_cpu_s"] / part["found_cpu_s"], 3),
                    "wall_ratio": round(min(r["found_s"] for r in before)
                                        / min(r["found_s"] for r in runs), 3)}
                print(f"findable with {args.base}: found after "
                      f"{[r['found_s'] for r in before]} s, "
                      f"{[r['found_cpu_s'] for r in before]} CPU s; this code "
                      f"{[r['found_s'] for r in runs]} s, "
                      f"{[r['found_cpu_s'] for r in runs]} CPU s", flush=True)
            results["findable"] = {"notes": args.notes, "last_file": last, **part}
            print(f"findable: {args.notes} notes, {part['chunks']} chunks; the last file "
                  f"found by keywords after {part['found_s']} s (scan done at "
                  f"{part['scan_done_s']} s); {part['vectors_in_follow']} vectors in the next "
                  f"{part['followed_s']} s; all projected at "
                  f"{part.get('projected_all_vectors_s')} s", flush=True)
        if args.docs:
            dataset = base / "scifact-subset"
            results["subset"] = scifact_subset(dataset, args.docs)
            other = venv_python(args.other)
            runs: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
            for _ in range(args.repeats):
                runs["this"].append(evaluate(sys.executable, dataset, base))
                runs["other"].append(evaluate(other, dataset, base))
            best = {k: min(v, key=lambda r: r["index"]["seconds"]) for k, v in runs.items()}
            ratio = best["other"]["index"]["seconds"] / best["this"]["index"]["seconds"]
            cpu = {k: min(r["cpu_s"] for r in v) for k, v in runs.items()}
            results["complete"] = {
                "other": str(args.other), "runs": runs,
                "this_index_s": best["this"]["index"]["seconds"],
                "other_index_s": best["other"]["index"]["seconds"],
                "speed_ratio": round(ratio, 3),  # other's time / this one's: >1 is faster
                "this_cpu_s": cpu["this"], "other_cpu_s": cpu["other"],
                "cpu_ratio": round(cpu["other"] / cpu["this"], 3),
                "quality": {code: best[code]["modes"] for code in best}}
            print(f"complete: {results['subset']['documents']} abstracts, "
                  f"{best['this']['chunks']} chunks; every vector in after "
                  f"{best['this']['index']['seconds']} s (previous code "
                  f"{best['other']['index']['seconds']} s): speed ratio {ratio:.3f}; CPU "
                  f"{cpu['this']} s against {cpu['other']} s: ratio "
                  f"{cpu['other'] / cpu['this']:.3f}")
            for mode, values in best["this"]["modes"].items():
                print(f"  {mode}: nDCG@10 {values['ndcg@10']} (previous "
                      f"{best['other']['modes'][mode]['ndcg@10']}), recall@100 "
                      f"{values['recall@100']} (previous "
                      f"{best['other']['modes'][mode]['recall@100']})")
    results["load_1min_after"] = load_1min()
    write_results(args, results)


if __name__ == "__main__":
    main()
