"""OCR: seconds per image and per scanned page, character error rate, and what OCR running
beside them costs plain-text indexing and searches.

    .venv/bin/python bench/ocr.py --files 100         # all three parts, about 15 minutes
    .venv/bin/python bench/ocr.py --parts read        # only seconds and error rate

Parts:
- read: SciFact abstracts rendered at 150 dpi in DejaVu Sans and Serif at 10, 12 and 14 pt,
  as PNG images and as one scanned PDF of those pages, converted by the real converter (the
  OCR worker, its threads as INDEX_CPU_BUDGET gives them), in seconds waited and
  in CPU seconds of the OCR worker (steadier on a shared machine). Character error rate
  (CER): edit distance over the rendered text's length, spaces collapsed; also without spaces.
- indexing: the same plain-text files indexed into a new index, alone and while the OCR
  worker reads images without pause; rounds alternate. Speed ratio = alone / beside.
- search: hybrid searches over a copy of a 50,000-chunk index, idle and while the OCR worker
  reads images; p50/p95 of whole calls, query embedding included.

Figures on: docs/ocr.md.
"""

from __future__ import annotations

import io
import json
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import data
import msgspec
from common import ROOT, Stopwatch, cpu_s, parser_for, summary, write_results

FONTS = Path("/usr/share/fonts/truetype/dejavu")
DPI = 150


async def _convert(conv: Any, kind: str, content: bytes, name: str) -> Any:
    from pocketmcp.core.text import sha256

    return await conv.convert(kind, content, name, sha256(content))


def render(text: str, face: str, points: int, width: int = 1240) -> Any:
    """`text` set in `face` at `points` pt on a page `width` pixels wide at DPI."""
    from PIL import Image, ImageDraw, ImageFont

    size = round(points * DPI / 72)
    shape = ImageFont.truetype(str(FONTS / f"{face}.ttf"), size)
    margin = 90
    columns = max(20, int((width - 2 * margin) / (size * 0.56)))
    lines = textwrap.wrap(text, columns)
    while lines and max(shape.getlength(line) for line in lines) > width - 2 * margin:
        columns -= 2
        lines = textwrap.wrap(text, columns)
    step = round(size * 1.45)
    image = Image.new("L", (width, 2 * margin + step * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * step), line, font=shape, fill=0)
    return image, " ".join(lines)


def edits(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def ocr_text(markdown: str) -> str:
    """The text OCR read: its lines, headings left out, spaces collapsed."""
    return " ".join(" ".join(line for line in markdown.splitlines()
                             if not line.startswith("## ")).split())


def cer(reference: str, found: str) -> dict[str, float]:
    spaced = edits(reference, found) / len(reference)
    bare = edits(reference.replace(" ", ""), found.replace(" ", "")) / len(
        reference.replace(" ", ""))
    return {"cer": round(spaced, 4), "cer_without_spaces": round(bare, 4)}


def pages(count_words: int) -> list[tuple[str, int, Any, str]]:
    """(face, points, image, reference text) of the rendered set."""
    texts = [row["text"] for row in data.corpus(40) if len(row["text"].split()) >= count_words]
    out = []
    for n, (face, points) in enumerate((f, p) for p in (10, 12, 14)
                                       for f in ("DejaVuSans", "DejaVuSerif")):
        text = " ".join(texts[n].split()[:count_words])
        image, reference = render(text, face, points)
        out.append((face, points, image, reference))
    return out


def converter(threads: int | None = None) -> Any:
    from pocketmcp.config import load
    from pocketmcp.convert.pool import Converter

    limits = load({}, environ={"CONVERT_TIMEOUT_S": "600"}).convert
    # No cache: every image is read; the OCR worker's threads as asked.
    return Converter(msgspec.structs.replace(limits, ocr=msgspec.structs.replace(
        limits.ocr, cache_dir=None, threads=threads or limits.ocr.threads)))


def ocr_cpu(conv: Any) -> float:
    """CPU seconds the OCR worker has used: on a shared machine they vary less than the
    time waited."""
    workers = conv._ocr_pool._idle
    return cpu_s(workers[0].process.pid) if workers else 0.0


def png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


async def read_part(words: int) -> dict[str, Any]:
    from fpdf import FPDF

    rendered = pages(words)
    conv = converter()
    try:
        await _convert(conv, "image", png(rendered[0][2]), "warm.png")  # the engine loads
        images, per_size, image_cpu = Stopwatch(), {}, []
        for face, points, image, reference in rendered:
            before = ocr_cpu(conv)
            with images:
                got = await _convert(conv, "image", png(image), f"{face}-{points}.png")
            image_cpu.append(ocr_cpu(conv) - before)
            per_size[f"{face} {points} pt"] = cer(reference, ocr_text(got.text))
        doc = FPDF(unit="pt")
        for _, _, image, _ in rendered:
            width, height = image.width * 72 / DPI, image.height * 72 / DPI
            doc.add_page(format=(width, height))
            doc.image(io.BytesIO(png(image)), x=0, y=0, w=width, h=height)
        started, before = time.perf_counter(), ocr_cpu(conv)
        scanned = await _convert(conv, "pdf", bytes(doc.output()), "scan.pdf")
        pdf_s, pdf_cpu = time.perf_counter() - started, ocr_cpu(conv) - before
        reference = " ".join(r for *_, r in rendered)
        return {
            "words_per_page": words,
            "threads": conv.limits.ocr.threads,
            "image_s": summary([t / 1000 for t in images.times], unit="s"),
            "image_s_mean": round(statistics.mean(images.times) / 1000, 2),
            "image_cpu_s": summary(image_cpu, unit="s"),
            "pdf_pages": len(rendered), "pdf_s_per_page": round(pdf_s / len(rendered), 2),
            "pdf_cpu_s_per_page": round(pdf_cpu / len(rendered), 2),
            "cer_by_image": per_size,
            "cer_images_mean": round(statistics.mean(v["cer"] for v in per_size.values()), 4),
            "cer_scanned_pdf": cer(reference, ocr_text(scanned.text)),
        }
    finally:
        await conv.aclose()


async def busy_ocr(conv: Any, stop: anyio.Event, done: list[float]) -> None:
    """Keeps the OCR worker reading images until `stop`; seconds of each in `done`."""
    rendered = [png(image) for _, _, image, _ in pages(60)[:2]]
    n = 0
    while not stop.is_set():
        started = time.perf_counter()
        await _convert(conv, "image", rendered[n % 2], f"busy-{n}.png")
        done.append(time.perf_counter() - started)
        n += 1


async def while_ocr(work: Callable[[], Any], beside: bool) -> tuple[Any, int]:
    """work()'s result, run alone or with the OCR worker busy beside it (warmed first)."""
    if not beside:
        return await work(), 0
    conv = converter()
    done: list[float] = []
    try:
        await _convert(conv, "image", png(pages(60)[0][2]), "warm.png")
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(busy_ocr, conv, stop, done)
            try:
                result = await work()
            finally:
                stop.set()
            tg.cancel_scope.cancel()
        return result, len(done)
    finally:
        await conv.aclose()


async def indexing_part(files: int, rounds: int) -> dict[str, Any]:
    from pocketmcp.config import load
    from pocketmcp.plans import INDEXING
    from pocketmcp.runtime import open_runtime

    with tempfile.TemporaryDirectory(prefix="pocketmcp-ocr-bench-") as tmp:
        kb = data.abstracts(Path(tmp) / "kb", files)

        async def index_once(n: list[int] = [0]) -> float:  # noqa: B006
            n[0] += 1
            config = load({}, environ={"SQLITE_PATH": f"{tmp}/i{n[0]}/index.db",
                                       "WATCH_DIR": str(kb)})
            started = time.perf_counter()
            async with open_runtime(config, INDEXING) as rt:
                await rt.started()
                assert rt.pipeline is not None
                await rt.pipeline.scan_done.wait()
            return time.perf_counter() - started

        alone: list[float] = []
        beside: list[float] = []
        images = 0
        for _ in range(rounds):
            seconds, _ = await while_ocr(index_once, False)
            alone.append(seconds)
            seconds, read = await while_ocr(index_once, True)
            beside.append(seconds)
            images += read
    a, b = statistics.median(alone), statistics.median(beside)
    return {"files": files, "rounds": rounds, "alone_s": [round(x, 1) for x in alone],
            "beside_ocr_s": [round(x, 1) for x in beside], "images_read_beside": images,
            "files_per_s_alone": round(files / a, 1), "files_per_s_beside_ocr": round(files / b, 1),
            "speed_ratio": round(a / b, 3), "goal": ">= 0.8"}


async def search_part(index: Path, queries: int) -> dict[str, Any]:
    from pocketmcp.search.run import search

    texts = data.queries()
    with tempfile.TemporaryDirectory(prefix="pocketmcp-ocr-bench-") as tmp:
        for suffix in ("", ".vectors"):
            shutil.copyfile(f"{index}{suffix}", f"{tmp}/index.db{suffix}")
        out: dict[str, Any] = {"index": str(index), "queries": queries}
        async with data.reading(Path(tmp) / "index.db") as reading:

            async def calls(offset: int) -> Stopwatch:
                watch = Stopwatch()
                for i in range(queries):
                    with watch:
                        await search(reading, texts[(offset + i) % len(texts)], top_k=10,
                                     mode="hybrid")
                return watch

            idle, _ = await while_ocr(lambda: calls(0), False)
            busy, read = await while_ocr(lambda: calls(queries), True)
            idle2, _ = await while_ocr(lambda: calls(2 * queries), False)
        out["idle"] = idle.summary()
        out["beside_ocr"] = busy.summary()
        out["idle_after"] = idle2.summary()
        out["images_read_beside"] = read
        out["p95_ratio"] = round(out["beside_ocr"]["p95_ms"] / max(
            out["idle"]["p95_ms"], out["idle_after"]["p95_ms"]), 2)
        out["goal"] = "<= 2"
    return out


def main() -> None:
    parser = parser_for(__doc__, "ocr")
    parser.add_argument("--parts", default="read,indexing,search")
    parser.add_argument("--words", type=int, default=120, help="words on each rendered page")
    parser.add_argument("--files", type=int, default=150, help="text files indexed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--index", type=Path, default=ROOT.parent / "benchdata" / "search-50000.db",
                        help="the index searched (kept by bench/search.py --keep; copied)")
    args = parser.parse_args()
    parts = args.parts.split(",")
    results: dict[str, Any] = {}
    if "read" in parts:
        results["read"] = anyio.run(read_part, args.words)
        print(json.dumps(results["read"]), file=sys.stderr, flush=True)
    if "indexing" in parts:
        results["indexing"] = anyio.run(indexing_part, args.files, args.rounds)
        print(json.dumps(results["indexing"]), file=sys.stderr, flush=True)
    if "search" in parts:
        results["search"] = anyio.run(search_part, args.index, args.queries)
        print(json.dumps(results["search"]), file=sys.stderr, flush=True)
    write_results(args, {"settings": {k: v for k, v in vars(args).items()
                                      if k in ("parts", "words", "files", "rounds", "queries")},
                         **results})


if __name__ == "__main__":
    main()
