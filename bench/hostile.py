"""Hostile inputs of each kind, in process: how many are tried, how many end in anything but
a kept value or a coded error (should be 0), and the worst time one takes.

Kinds: front matter (impossible dates, zones, 64-bit overflow, deep and aliased structures),
note texts built to make regular expressions backtrack, globs (random ones and piles of
stars against long paths), export lines with one field made hostile (ids, paths, libraries,
vectors, offsets, integers, hashes, coverage, sizes), and search filters (spans, integers,
globs, sizes); and (bench/hostile_files.py) whole import files (/dev/zero, lines that never
end, hashes, coverage, sizes), search arguments outside the tool's schema, POST bodies over
the limit of every content type (declared and chunked), tokens beyond loopback, and with
--ocr a scan of blank pages read within the file's OCR time budget.

    .venv/bin/python bench/hostile.py
    .venv/bin/python bench/hostile.py --each 2000 --seed 7
    .venv/bin/python bench/hostile.py --ocr 500 --ocr-budget 30

Results: bench/results/hostile.json.

Figures on: docs/reliability.md.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from common import parser_for, write_results
from hostile_files import (
    ToolCalls,
    blank_scans,
    bodies,
    import_files,
    post,
    read_import,
    take_token,
    tokens,
    tool_arguments,
)


def _measure(inputs: list[Any], run: Callable[[Any], str]) -> dict[str, Any]:
    """Each input through `run` (which names its outcome); counts and times."""
    times: list[float] = []
    outcomes: dict[str, int] = {}
    with contextlib.suppress(Exception):  # modules imported before the clock runs
        run(inputs[-1])
    for item in inputs:
        started = time.perf_counter()
        try:
            outcome = run(item)
        except Exception as exc:  # the figure that must stay 0
            outcome = f"uncoded {type(exc).__name__}"
        times.append((time.perf_counter() - started) * 1000)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return {"tried": len(inputs), "outcomes": outcomes,
            "uncoded": sum(n for k, n in outcomes.items() if k.startswith("uncoded")),
            "p50_ms": round(statistics.median(times), 3), "worst_ms": round(max(times), 2)}


# -- front matter -----------------------------------------------------------------------------

def _value(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(9 if depth < 3 else 7)
    if kind == 0:
        year, month, day = rng.randrange(0, 10000), rng.randrange(0, 100), rng.randrange(0, 100)
        return f"{year:04d}-{month:02d}-{day:02d}"
    if kind == 1:
        zone = rng.choice(["", "Z", "+99:00", "-12:00", "+14:00", "-23:59"])
        return (f"{rng.randrange(0, 10000):04d}-{rng.randrange(1, 13):02d}-"
                f"{rng.randrange(1, 32):02d}T{rng.randrange(0, 100):02d}:"
                f"{rng.randrange(0, 100):02d}:00{zone}")
    if kind == 2:
        return str(rng.choice([1, -1]) * rng.randrange(0, 2**rng.randrange(1, 90)))
    if kind == 3:
        return rng.choice([".nan", ".inf", "-.inf", "1e999", "0x" + "f" * 20, "0o777"])
    if kind == 4:
        return "[" * (n := rng.randrange(1, 60)) + "]" * n
    if kind == 5:
        return json.dumps("".join(rng.choice("ab\x00\x1b\u202e\ud7ff:#-") for _ in range(10)))
    if kind == 6:
        return rng.choice(["~", "null", "yes", "no", "''", "!!binary aGVsbG8="])
    if kind == 7:
        return "[" + ", ".join(_value(rng, depth + 1) for _ in range(rng.randrange(1, 4))) + "]"
    return "{" + ", ".join(f"k{i}: {_value(rng, depth + 1)}"
                           for i in range(rng.randrange(1, 4))) + "}"


def front_matters(rng: random.Random, each: int) -> list[str]:
    bomb = ("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
            "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n")
    out = [bomb]
    for _ in range(each - 1):
        fields = "\n".join(f"f{i}: {_value(rng)}" for i in range(rng.randrange(1, 6)))
        out.append(fields + "\n")
    return [f"---\n{block}---\n# Body\n\nText #tag\n" for block in out]


def read_front_matter(text: str) -> str:
    from pocketmcp.core.notes import read_note

    note = read_note(text)
    msgspec.json.encode(note.facts.properties)
    if note.problem:
        return "block reported"
    return "fields dropped" if note.dropped else "kept"


# -- note texts -------------------------------------------------------------------------------

def texts(size: int) -> list[str]:
    pieces = {"brackets": "[", "wiki": "[[a", "links": "[a](", "spaces": " ",
              "attribute values": "{k=", "backticks": "` a", "comments": "<!--",
              "fences": "```\n", "hashes": "#", "blank lines": "\n \n"}
    return [piece * (size // len(piece)) + "{" for piece in pieces.values()]


def read_text(text: str) -> str:
    from pocketmcp.core import markdown
    from pocketmcp.core.notes import read_note

    read_note(text)
    markdown.clean(text)
    return "read"


# -- globs ------------------------------------------------------------------------------------

def globs(rng: random.Random, each: int) -> list[tuple[str, str]]:
    pieces = ["a", "b", "/", "*", "**", "?", "[ab]", "[!a]", "\\", ".", "md", "[", "//"]
    out = [("*a" * stars + "b", "a" * length)
           for stars in (5, 20, 60, 200) for length in (200, 1000, 4000)]
    while len(out) < each:
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12)))
        path = "/".join(rng.choice(["a", "b", "ab", "a.md", ".a"])
                        for _ in range(rng.randrange(1, 6)))
        out.append((pattern, path))
    return out


def match_glob(case: tuple[str, str]) -> str:
    from pocketmcp.core.globs import Glob, GlobError

    try:
        return "matched" if Glob(case[0]).match(case[1]) else "not matched"
    except GlobError:
        return "refused (coded)"


# -- export lines -----------------------------------------------------------------------------

def _vector(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, "<f4").tobytes()).decode()


GOOD: dict[str, Any] = {
    "type": "document", "external_id": "file:notes/a.md", "source": "file", "uri": None,
    "title": "A", "library": "default", "metadata": {}, "properties": {}, "tags": ["x"],
    "created": "2024-03-01", "modified": "2024-03-01T09:30:00.000Z", "links": [],
    "content": "Some text here.", "sha256": "0" * 64, "size_bytes": 15, "mtime_ns": 1,
    "chunks": [{"idx": 0, "start": 0, "end": 15, "tokens": 4,
                "sha256": "9c140239bed378d3e80ae21add23791b545bb80264dc63f943a1fdba8b80ebcb",
                "section": "", "vector": _vector([0.1, 0.2, 0.3, 0.4])}],
}


def export_lines(rng: random.Random, each: int) -> list[dict[str, Any]]:
    from pocketmcp.ops.archive_check import chunk_digest

    hostile = ["", "\x00", "../../etc", "/etc/shadow", "file:../../../etc/passwd",
               "path:default:/etc/shadow", "path:default:/data/kb/../../etc/x", "a\x1bb",
               "file:/abs", "file:a/./b", "x" * 5000, "file:a\\b", "path:other:/data/kb/a"]
    out = []
    for _ in range(each):
        item = json.loads(json.dumps(GOOD))
        field = rng.choice(["external_id", "library", "uri", "content", "created", "vector",
                            "offsets", "metadata", "tags", "size_bytes", "sha256",
                            "chunk_sha256", "uncovered", "oversize"])
        if field == "sha256":
            item["sha256"] = rng.choice(["zz", "", "0" * 63, "G" * 64, "0" * 64 + "\x00"])
        elif field == "chunk_sha256":
            item["chunks"][0]["sha256"] = rng.choice(["0" * 64, "zz", chunk_digest("other", "")])
        elif field == "uncovered":
            item["content"] += " more words" * rng.randrange(1, 10_000)
        elif field == "oversize":
            item["content"] = "x" * rng.choice([2**20 + 1, 4 * 2**20])
            item["chunks"] = []
        elif field == "vector":
            item["chunks"][0]["vector"] = _vector([rng.choice([0.1, float("nan"), float("inf")])
                                                   for _ in range(rng.choice([3, 4, 5]))])
        elif field == "offsets":
            item["chunks"][0]["end"] = rng.randrange(-5, 40)
        elif field == "metadata":
            item["metadata"] = {"n": rng.choice([1, -1]) * 2**rng.randrange(10, 80)}
        elif field == "tags":
            item["tags"] = [rng.choice(hostile)]
        elif field == "size_bytes":
            item["size_bytes"] = rng.choice([-1, 2**63, 2**70, 0])
        elif field == "created":
            item["created"] = rng.choice(["2024-02-30", "0000-01-01", "9999-12-31T23:59:59-12:00",
                                          "yesterday", "2024-03-01"])
        else:
            item[field] = rng.choice(hostile)
            if field == "external_id" and item[field].startswith(("file:", "path:")):
                item["source"] = "file"
        chunk = item["chunks"][0] if item["chunks"] else None
        if chunk is not None and field != "chunk_sha256" and 0 <= chunk["end"] <= 15:
            chunk["sha256"] = chunk_digest(item["content"][chunk["start"]:chunk["end"]], "")
        out.append(item)
    return out


def check_line(item: dict[str, Any]) -> str:
    from pathlib import Path

    from pocketmcp.ops.archive_check import Bad, document
    from pocketmcp.ops.archive_format import DocLine

    try:
        doc = msgspec.json.decode(json.dumps(item).encode(), type=DocLine)
    except msgspec.ValidationError:
        return "refused (coded)"
    try:
        document(doc, 4, (Path("/data/kb"),), max_bytes=2**20, most_chunks=1000)
    except Bad:
        return "refused (coded)"
    return "accepted"


# -- filters ----------------------------------------------------------------------------------

def filters(rng: random.Random, each: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"metadata": {f"k{i}": i for i in range(10_000)}}]
    while len(out) < each:
        kind = rng.randrange(6)
        if kind == 0:
            out.append({"modified_after": f"{rng.randrange(1, 999999)}{rng.choice('hdwmy')}"})
        elif kind == 1:
            out.append({"metadata": {"n": rng.choice([1, -1]) * 2**rng.randrange(1, 90)}})
        elif kind == 2:
            out.append({"path_glob": "".join(rng.choice(["*", "a", "\\", "/", "[", "**"])
                                             for _ in range(rng.randrange(1, 40)))})
        elif kind == 3:
            out.append({"metadata": {"k" * rng.randrange(1, 400): "v" * rng.randrange(0, 3000)}})
        elif kind == 4:
            out.append({"created_before": rng.choice(["2024-02-30", "0001-01-01T00:00:00+01:00",
                                                      "9999-12-31", "nope", "-1d"])})
        else:
            out.append({"metadata": {"n": {"gt": rng.choice([1, 2**70, "3000y", "2024-01-01"])}}})
    return out


def check_filter(given: dict[str, Any]) -> str:
    from pocketmcp.errors import PocketError
    from pocketmcp.search.filters import Scope
    from pocketmcp.search.results import SearchFilter

    try:
        Scope.of(SearchFilter.model_validate(given))
    except PocketError as exc:
        return f"refused ({exc.code})"
    except ValueError:
        return "refused by the schema"
    return "accepted"


def main() -> int:
    parser = parser_for(__doc__, "hostile")
    parser.add_argument("--each", type=int, default=1000, help="random inputs of each kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--text-size", type=int, default=200_000,
                        help="characters of each pathological note text")
    parser.add_argument("--files", type=int, default=100,
                        help="import files, and POST bodies over the limit, of each run")
    parser.add_argument("--ocr", type=int, default=0, metavar="PAGES",
                        help="also OCR a PDF of PAGES blank scanned pages (the OCR extra)")
    parser.add_argument("--ocr-budget", type=float, default=120.0,
                        help="OCR time budget of that scan (twice CONVERT_TIMEOUT_S: 120 s)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        kinds = {
            "front_matter": _measure(front_matters(rng, args.each), read_front_matter),
            "note_texts": _measure(texts(args.text_size), read_text),
            "globs": _measure(globs(rng, args.each), match_glob),
            "export_lines": _measure(export_lines(rng, args.each), check_line),
            "filters": _measure(filters(rng, args.each), check_filter),
            "import_files": _measure(import_files(rng, args.files, Path(tmp)), read_import),
            "tool_arguments": _measure(tool_arguments(rng, args.each), ToolCalls()),
            "request_bodies": _measure(bodies(rng, args.files), post),
            "tokens": _measure(tokens(rng, args.each), take_token),
        }
    ocr = blank_scans(args.ocr, args.ocr_budget) if args.ocr else None
    if ocr is not None:
        print(f"ocr            {ocr}", file=sys.stderr)
    for name, found in kinds.items():
        print(f"{name:14} tried {found['tried']:5}  uncoded {found['uncoded']}  "
              f"p50 {found['p50_ms']} ms  worst {found['worst_ms']} ms  {found['outcomes']}",
              file=sys.stderr)
    write_results(args, {"kinds": kinds, "seed": args.seed, "text_size": args.text_size,
                         "files": args.files, "blank_scan": ocr})
    return 1 if any(k["uncoded"] for k in kinds.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
