"""Conversion speed per format, through PocketMCP's contained converter.

Builds documents of each format from SciFact abstracts (titles as headings), then converts
each one `--runs` times in a warm worker process and once in a fresh one (process start and
library imports included). Reports p50/p95 ms per file, MB/s and characters/s of text, and the
ratio of the contained call to converting in-process (the cost of isolation).

    .venv/bin/python bench/convert.py [--runs 9] [--out bench/results/convert.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import docs  # noqa: E402  (the generators the tests use)

from pocketmcp.convert import formats, kinds  # noqa: E402
from pocketmcp.convert.pool import Converter, Limits  # noqa: E402

CORPUS = ROOT.parent / "shared" / "datasets" / "scifact-train" / "corpus.jsonl"


def abstracts(n: int) -> list[tuple[str, str]]:
    out = []
    with CORPUS.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row["title"] and row["text"]:
                # fpdf's core fonts are Latin-1 only.
                out.append((row["title"][:150].encode("latin-1", "replace").decode("latin-1"),
                            row["text"].encode("latin-1", "replace").decode("latin-1")))
            if len(out) == n:
                break
    return out


def build(folder: Path) -> dict[str, Path]:
    sections = abstracts(60)
    rows = [["title", "words", "first sentence"]] + [
        [t, str(len(b.split())), b.split(". ")[0]] for t, b in abstracts(1000)]
    made = {
        "pdf (30 pages)": docs.pdf(folder / "a.pdf", "Abstracts", sections[:30]),
        "docx (60 sections)": docs.docx(folder / "a.docx", "Abstracts", sections),
        "html (60 sections)": docs.html(folder / "a.html", "Abstracts", sections),
        "pptx (30 slides)": docs.pptx(folder / "a.pptx", "Abstracts", sections[:30]),
        "xlsx (1,000 rows)": docs.xlsx(folder / "a.xlsx", "Abstracts", rows),
        "epub (60 chapters)": docs.epub(folder / "a.epub", "Abstracts", sections),
    }
    csv_path = folder / "a.csv"
    csv_path.write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows),
                        encoding="utf-8")
    made["csv (1,000 rows)"] = csv_path
    return made


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(files: dict[str, Path], runs: int) -> list[dict[str, object]]:
    results = []
    for label, path in files.items():
        kind = kinds.kind_of(path.name)
        assert kind is not None
        data = path.read_bytes()
        cold = Converter(Limits(workers=1))
        started = time.perf_counter()
        converted = await cold.convert(kind, data, path.name)
        cold_ms = (time.perf_counter() - started) * 1000
        warm = []
        for _ in range(runs):
            started = time.perf_counter()
            await cold.convert(kind, data, path.name)
            warm.append((time.perf_counter() - started) * 1000)
        await cold.aclose()
        direct = []
        for _ in range(runs):
            started = time.perf_counter()
            formats.convert(kind, data, max_unpacked=2**30)
            direct.append((time.perf_counter() - started) * 1000)
        p50 = statistics.median(warm)
        results.append({
            "format": label, "bytes": len(data), "text_chars": len(converted.text),
            "headings": sum(1 for line in converted.text.splitlines()
                            if line.startswith("#")),
            "p50_ms": round(p50, 1), "p95_ms": round(pct(warm, 0.95), 1),
            "cold_ms": round(cold_ms, 1),
            "mb_per_s": round(len(data) / 2**20 / (p50 / 1000), 2),
            "kchars_per_s": round(len(converted.text) / 1000 / (p50 / 1000), 1),
            "in_process_p50_ms": round(statistics.median(direct), 1),
            "contained_over_in_process": round(p50 / statistics.median(direct), 2),
        })
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "convert.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp))
        results = anyio.run(measure, files, args.runs)
    args.out.write_text(json.dumps({"runs": args.runs, "results": results}, indent=1) + "\n")
    print("| format | size | text | p50 | p95 | first call (new worker) | MB/s "
          "| contained / in-process |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['format']} | {int(r['bytes']) // 1024} KiB | "
              f"{int(r['text_chars']) // 1000}k chars | {r['p50_ms']} ms | "
              f"{r['p95_ms']} ms | {r['cold_ms']} ms | {r['mb_per_s']} | "
              f"{r['contained_over_in_process']} |")


if __name__ == "__main__":
    main()
