"""Conversion speed per format, through PocketMCP's contained converter.

Builds documents of each format from SciFact abstracts (titles as headings), then converts
each one `--runs` times in a warm worker process and once in a fresh one (process start and
library imports included). Reports p50/p95 ms per file, MB/s and characters/s of text, and the
ratio of the contained call to converting in-process (the cost of isolation).

    .venv/bin/python bench/convert.py [--runs 9]

Results: bench/results/convert.json.

Figures on: docs/benchmarks.md (the conversion table); docs/formats.md.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import anyio
import data
from common import Stopwatch, parser_for, pct, write_results

from pocketmcp.convert import formats, kinds
from pocketmcp.convert.limits import Limits
from pocketmcp.convert.pool import Converter
from pocketmcp.core.text import sha256

LABELS = {"pdf": "pdf (30 pages)", "docx": "docx (60 sections)", "html": "html (60 sections)",
          "pptx": "pptx (30 slides)", "xlsx": "xlsx (1,000 rows)",
          "epub": "epub (60 chapters)", "csv": "csv (1,000 rows)"}


def abstracts(n: int) -> list[tuple[str, str]]:
    """(title, text) of the first n SciFact abstracts with both; Latin-1 only, as fpdf's
    core fonts are."""
    out = []
    for row in data.corpus():
        if row["title"] and row["text"]:
            out.append((row["title"][:150].encode("latin-1", "replace").decode("latin-1"),
                        row["text"].encode("latin-1", "replace").decode("latin-1")))
        if len(out) == n:
            break
    return out


def build(folder: Path) -> dict[str, Path]:
    rows = [["title", "words", "first sentence"]] + [
        [t, str(len(b.split())), b.split(". ")[0]] for t, b in abstracts(1000)]
    made = data.documents(folder, abstracts(60), rows, pages=30)
    return {LABELS[kind]: made[kind] for kind in LABELS}


async def measure(files: dict[str, Path], runs: int) -> list[dict[str, object]]:
    results = []
    for label, path in files.items():
        kind = kinds.kind_of(path.name)
        assert kind is not None
        content = path.read_bytes()
        digest = sha256(content)
        cold = Converter(Limits(workers=1))
        first, warm, direct = Stopwatch(), Stopwatch(), Stopwatch()
        with first:
            converted = await cold.convert(kind, content, path.name, digest)
        for _ in range(runs):
            with warm:
                await cold.convert(kind, content, path.name, digest)
        await cold.aclose()
        for _ in range(runs):
            with direct:
                formats.convert(kind, content, max_unpacked=2**30)
        p50 = statistics.median(warm.times)
        results.append({
            "format": label, "bytes": len(content), "text_chars": len(converted.text),
            "headings": sum(1 for line in converted.text.splitlines()
                            if line.startswith("#")),
            "p50_ms": round(p50, 1), "p95_ms": round(pct(warm.times, 0.95), 1),
            "cold_ms": round(first.times[0], 1),
            "mb_per_s": round(len(content) / 2**20 / (p50 / 1000), 2),
            "kchars_per_s": round(len(converted.text) / 1000 / (p50 / 1000), 1),
            "in_process_p50_ms": round(statistics.median(direct.times), 1),
            "contained_over_in_process": round(p50 / statistics.median(direct.times), 2),
        })
    return results


def main() -> None:
    parser = parser_for(__doc__, "convert")
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp))
        results = anyio.run(measure, files, args.runs)
    write_results(args, {"runs": args.runs, "results": results})
    print(json.dumps(results, indent=1))  # the table: scripts/results_tables.py convert


if __name__ == "__main__":
    main()
