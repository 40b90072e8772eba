"""What the bench measures on: SciFact's abstracts and claims, vectors made from them,
synthetic indexes of any size written through the store, and documents of each format.

The synthetic indexes mix real chunk embeddings in pairs with a little noise, each chunk
carrying a real chunk's text, so both retrievers see realistic data at 10k to 1M chunks. The
base vectors are embedded once and cached in `.cache/bench-base-<docs>.npz`.
"""

from __future__ import annotations

import json
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import DATASET, ROOT

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the built-in model's identity
DIM = 384
BASE = ROOT / ".cache" / "bench-base-1500.npz"  # the default base vectors


def corpus(n: int | None = None) -> list[dict[str, str]]:
    """SciFact's abstracts (`_id`, `title`, `text`), the first n."""
    rows = []
    with open(DATASET / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if n is not None and len(rows) == n:
                break
            rows.append(json.loads(line))
    return rows


def queries() -> list[str]:
    """SciFact's claims, in order."""
    with open(DATASET / "queries.jsonl", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def base_vectors(docs: int = 1500, index: Path | None = None
                 ) -> tuple[np.ndarray, list[str], np.ndarray, list[str]]:
    """(chunk vectors, chunk texts, query vectors, query texts): SciFact's first `docs`
    abstracts chunked and embedded by the built-in model, or the chunks of `index` (one kept
    by `pocketmcp eval --index`); cached."""
    cache = ROOT / ".cache" / f"bench-base-{'index' if index else docs}.npz"
    if cache.exists():
        data = np.load(cache, allow_pickle=False)
        return (data["vectors"], [str(t) for t in data["texts"]], data["queries"],
                [str(t) for t in data["query_texts"]])
    from pocketmcp.config import load
    from pocketmcp.core.chunking import Chunker
    from pocketmcp.embed.local import LocalEmbedder
    from pocketmcp.embed.models import ModelSpec

    embedder = LocalEmbedder(ModelSpec(load({}, environ={}).embed))
    if index is not None:
        from pocketmcp.store.sqlite.connect import open_sync_reader

        conn = open_sync_reader(index)
        rows = conn.execute("SELECT embedding, text FROM vec_chunks").fetchall()
        conn.close()
        vectors = np.frombuffer(b"".join(r[0] for r in rows), np.float32).reshape(len(rows), -1)
        texts = [r[1] for r in rows]
    else:
        chunker = Chunker(embedder.tokenizer, size=1000, overlap=120,
                          max_tokens=embedder.max_tokens)
        texts = [c.text for doc in corpus(docs)
                 for c in chunker.split(f"# {doc['title']}\n\n{doc['text']}")]
        print(f"embedding {len(texts)} base chunks once (cached in {cache})", file=sys.stderr)
        vectors = np.concatenate([embedder.embed(texts[i:i + 1]) for i in range(len(texts))])
    query_texts = queries()
    query_vectors = np.concatenate([embedder.embed([q]) for q in query_texts])
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, vectors=vectors, texts=np.asarray(texts), queries=query_vectors,
             query_texts=np.asarray(query_texts))
    return vectors, texts, query_vectors, query_texts


def synthesise(base: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n unit vectors mixed from pairs of real ones; (vectors, index of the text each uses)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(base), n)
    b = rng.integers(0, len(base), n)
    mix = rng.uniform(0.0, 0.5, n).astype(np.float32)[:, None]
    noise = rng.normal(0, 0.02, (n, base.shape[1])).astype(np.float32)
    out = base[a] + mix * base[b] + noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32), a


def synthetic_doc(d: int, per_doc: int, texts: list[str], text_of: np.ndarray
                  ) -> tuple[list[Any], str]:
    """Document `d` of a synthesised index: its `per_doc` chunks (texts picked by `text_of`)
    and its whole text."""
    from pocketmcp.core.text import sha256
    from pocketmcp.messages import Chunk

    chunks, parts, offset = [], [], 0
    for i in range(per_doc):
        text = texts[int(text_of[d * per_doc + i])]
        chunks.append(Chunk(idx=i, start=offset, end=offset + len(text), text=text,
                            tokens=200, sha256=sha256(f"{d}:{i}")))
        parts.append(text)
        offset += len(text)
    return chunks, "".join(parts)


def build_index(path: Path, vectors: np.ndarray, text_of: np.ndarray, texts: list[str],
                per_doc: int = 4) -> None:
    """A SQLite index of the synthesised chunks, written through the store's writer."""
    from pocketmcp.core.identity import Identity
    from pocketmcp.messages import DocRecord
    from pocketmcp.store.sqlite.writes import SqliteWriter

    writer = SqliteWriter(path, Identity(model=MODEL, dim=vectors.shape[1]))
    try:
        n, step = len(vectors), 5000
        for start in range(0, n, step):
            writer.begin()
            for d in range(start // per_doc, min(n, start + step) // per_doc):
                chunks, _ = synthetic_doc(d, per_doc, texts, text_of)
                writer.upsert(DocRecord(external_id=f"file:doc{d}.md", source="file",
                                        uri=None, title=f"Document {d}", content="",
                                        sha256=str(d)),
                              chunks, vectors[d * per_doc:(d + 1) * per_doc].tobytes())
            writer.commit()
    finally:
        writer.close()


def prepare(db: Path, dim: int = DIM) -> float | None:
    """Bring an index's vector file up to date, as its writer does on start; seconds taken,
    or None when another process holds the writer lock (it keeps the file up to date)."""
    from pocketmcp.core.identity import Identity
    from pocketmcp.errors import WriterBusyError
    from pocketmcp.store.sqlite.writes import SqliteWriter

    started = time.perf_counter()
    try:
        writer = SqliteWriter(db, Identity(model=MODEL, dim=dim))
    except WriterBusyError:
        return None
    try:
        writer.repair_vectors()
    finally:
        writer.close()
    return round(time.perf_counter() - started, 2)


def chunk_texts(n: int) -> list[str]:
    """The first n chunks of SciFact's abstracts as the pipeline embeds them."""
    from pocketmcp.config import load
    from pocketmcp.core.chunking import Chunker
    from pocketmcp.core.text import clean
    from pocketmcp.embed.models import bundled_tokenizer

    config = load({}, environ={})
    chunker = Chunker(bundled_tokenizer(), size=config.pipeline.chunk_size,
                      overlap=config.pipeline.chunk_overlap, max_tokens=256)
    out: list[str] = []
    for doc in corpus():
        out += [c.embed_text for c in chunker.split(clean(f"# {doc['title']}\n\n{doc['text']}"))]
        if len(out) >= n:
            break
    return out[:n]


# -- documents of each format (fpdf2, python-docx, python-pptx, openpyxl) ----------------------

Section = tuple[str, str]  # (heading, body)


def documents(folder: Path, sections: Sequence[Section], rows: Sequence[Sequence[str]],
              pages: int) -> dict[str, Path]:
    """One file of each convertible format in `folder`, keyed by extension: Word, HTML and
    EPUB (a chapter a section) from `sections`, PDF and PowerPoint from the first `pages` of
    them (a page or a slide each), Excel and CSV from `rows`."""
    from docx import Document
    from fpdf import FPDF
    from openpyxl import Workbook
    from pptx import Presentation

    pdf = FPDF()
    for heading, body in sections[:pages]:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 16)
        pdf.multi_cell(0, 9, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(folder / "a.pdf"))
    word = Document()
    deck = Presentation()
    for i, (heading, body) in enumerate(sections):
        word.add_heading(heading, 2)
        word.add_paragraph(body)
        if i >= pages:
            continue
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text = body
    word.save(str(folder / "a.docx"))
    deck.save(str(folder / "a.pptx"))
    html = "".join(f"<h2>{h}</h2><p>{b}</p>" for h, b in sections)
    (folder / "a.html").write_text(f"<!doctype html><html><head><title>Abstracts</title></head>"
                                   f"<body><main>{html}</main></body></html>", encoding="utf-8")
    book = Workbook()
    for row in rows:
        book.active.append(list(row))
    book.save(str(folder / "a.xlsx"))
    (folder / "a.csv").write_text("\n".join(",".join(f'"{c}"' for c in r) for r in rows),
                                  encoding="utf-8")
    _epub(folder / "a.epub", sections)
    return {p.suffix[1:]: p for p in sorted(folder.glob("a.*"))}


def _epub(path: Path, sections: Sequence[Section]) -> None:
    """The smallest EPUB 3 a reader takes: container, package (manifest, spine), chapters."""
    xhtml = '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title></head>' \
            "<body><h1>{0}</h1><p>{1}</p></body></html>"
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(len(sections)))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(sections)))
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml",
                      '<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                      'container"><rootfiles><rootfile full-path="content.opf" media-type='
                      '"application/oebps-package+xml"/></rootfiles></container>')
        book.writestr("content.opf",
                      '<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
                      'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Abstracts'
                      f"</dc:title></metadata><manifest>{items}</manifest><spine>{spine}"
                      "</spine></package>")
        for i, (heading, body) in enumerate(sections):
            book.writestr(f"c{i}.xhtml", xhtml.format(heading, body))
