"""What citing a match by line costs. Each chunk's lines (and pages) are counted when it is
written (`core.text.places`, one pass over its document's text) and stored with it; a
search reads them by chunk id. This measures, for documents of 10 KB to 10 MB:

- `count_at_write`: the count for all of a document's chunks, as the writer makes it;
- `count_at_search_*`: what counting through the text at search time instead would cost a
  match at the start, the middle and the end of the document (SQL over the stored text),
  the alternative not kept;
- `stored_spots_of_8`: reading eight matches' stored lines (`reader.spots`), beside the read
  of their rows that every search makes anyway (`hits_rows_of_8_matches`);
- `passage_1000_tokens_middle`: `get_document`'s passage around a chunk.

The documents are Markdown-like text of 80-character lines in 1000-character chunks with
random vectors, written through the SQLite writer (no model).

    .venv/bin/python bench/citations.py
    .venv/bin/python bench/citations.py --sizes 10000,1000000 --repeats 50

Results: bench/results/citations.json. Figures on: docs/search.md (citing a match).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import parser_for, summary, write_results

DIM = 384
CHUNK = 1000
# Newlines before a stretch's first and its last character, counted in the stored text.
COUNT = ("SELECT length(a) - length(replace(a, ?, '')), length(b) - length(replace(b, ?, '')) "
         "FROM (SELECT substr(content, 1, ?) AS a, substr(content, 1, ?) AS b FROM documents "
         "WHERE doc_id = ?)")


def document(size: int) -> str:
    line = "The quick brown fox jumps over the lazy dog near the river bank at dawn. ok\n"
    return (line * (size // len(line) + 1))[:size]


def build(path: Path, sizes: list[int]) -> None:
    from pocketmcp.core.identity import Identity
    from pocketmcp.core.text import sha256
    from pocketmcp.messages import Chunk, DocRecord
    from pocketmcp.store.sqlite.writes import SqliteWriter

    rng = np.random.default_rng(0)
    writer = SqliteWriter(path, Identity(model="bench/random", dim=DIM))
    try:
        for d, size in enumerate(sizes):
            text = document(size)
            chunks = [Chunk(idx=i, start=s, end=min(s + CHUNK, size), text=text[s:s + CHUNK],
                            tokens=200, sha256=sha256(f"{d}:{i}"))
                      for i, s in enumerate(range(0, size, CHUNK))]
            vectors = rng.normal(size=(len(chunks), DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

            def work(d: int = d, text: str = text, chunks: list[Any] = chunks,
                     vectors: Any = vectors) -> None:
                with writer.item():
                    writer.upsert(DocRecord(external_id=f"file:doc{d}.md", source="file",
                                            uri=None, title=f"Document {d}", content=text,
                                            sha256=str(d)), chunks, vectors.tobytes())
            writer.batch(work, [f"file:doc{d}.md"])
    finally:
        writer.close()


def measure(path: Path, sizes: list[int], repeats: int) -> dict[str, Any]:
    from pocketmcp.core.text import places
    from pocketmcp.ops.documents import around
    from pocketmcp.store.sqlite.queries import SqliteReader

    reader = SqliteReader(path)
    out: dict[str, Any] = {}
    try:
        for d, size in enumerate(sizes):
            doc_id = d + 1
            row = reader.document(doc_id)
            assert row is not None
            last = row.chunk_count - 1
            ids = {int(idx): int(cid) for cid, idx in reader.query(
                "SELECT chunk_id, idx FROM chunks WHERE doc_id = ?", (doc_id,))}
            figures: dict[str, Any] = {"chunks": row.chunk_count}
            spans = [(s, min(s + CHUNK, size)) for s in range(0, size, CHUNK)]
            text = document(size)
            times = []
            for _ in range(max(3, repeats // 10)):
                began = time.perf_counter()
                places(text, spans, pages=False)
                times.append((time.perf_counter() - began) * 1000)
            figures["count_at_write"] = summary(times, digits=3)
            for where, idx in (("start", 0), ("middle", last // 2), ("end", last)):
                start, end = idx * CHUNK, min(idx * CHUNK + CHUNK, size)
                times = []
                for _ in range(repeats):
                    began = time.perf_counter()
                    reader.query(COUNT, ("\n", "\n", start, max(start, end - 1), doc_id))
                    times.append((time.perf_counter() - began) * 1000)
                figures[f"count_at_search_{where}"] = summary(times, digits=3)
            eight = [ids[i * last // 7] for i in range(8)]
            times = []
            for _ in range(repeats):
                began = time.perf_counter()
                reader.spots(eight)
                times.append((time.perf_counter() - began) * 1000)
            figures["stored_spots_of_8"] = summary(times, digits=3)
            around_ids = [ids[last // 2]] * repeats
            times = []
            for chunk_id in around_ids:
                began = time.perf_counter()
                around(reader, row, chunk_id, 1000)
                times.append((time.perf_counter() - began) * 1000)
            figures["passage_1000_tokens_middle"] = summary(times, digits=3)
            out[f"{size}_chars"] = figures
        eight = list(range(1, 9))
        times = []
        for _ in range(repeats):
            began = time.perf_counter()
            reader.hits(eight)
            times.append((time.perf_counter() - began) * 1000)
        out["hits_rows_of_8_matches"] = summary(times, digits=3)
    finally:
        reader.close()
    return out


def main() -> None:
    parser = parser_for(__doc__ or "", "citations")
    parser.add_argument("--sizes", default="10000,100000,1000000,10000000",
                        help="document sizes in characters, comma-separated")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "index.db"
        build(db, sizes)
        results = measure(db, sizes, args.repeats)
    for name, figures in results.items():
        print(name, figures)
    write_results(args, {"sizes": sizes, "results": results})


if __name__ == "__main__":
    main()
