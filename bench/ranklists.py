"""What quality_cv.py ranks: per set, every chunk's stored vector, each query's vector and
its keyword lists, read once from the index and cached (`load_set`).

The keyword lists are the search op's own keyword stage (chunk and whole-document BM25,
depth 200), gathered the default way and the candidates' ways: per title weight, per cap on
a query's words, with the words of the first documents (RM3-like expansion), and whole-
document BM25 with the headings as a field of their own. Each chunk's text is kept too, for
the candidates that read it (proximity, headings).

Figures on: docs/search.md, through quality_cv.py.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import candidates
import data
import msgspec
import numpy as np

from pocketmcp.search.fuse import Params

DEPTH = 200


class Cache(msgspec.Struct):
    names: dict[int, str]  # doc_id -> corpus id
    chunk_ids: list[int]
    chunk_docs: list[int]
    background: float
    queries: dict[str, Any]  # qid -> {"text", "keyword", "doc_keyword", "first_chunk", "ref",
    #                                   "variants": {name: the same lists, another way}}
    texts: dict[int, str] = {}  # chunk id -> its section path and text
    words_seconds: dict[str, float] = {}  # variant -> its keyword stage's time, summed


# Keyword lists gathered besides the default's, each another way of searching words:
# a title (section path) weight, a longer or shorter cap on the words searched, and the query
# expanded with words of its first documents (RM3-like, `expansion`).
TITLE_WEIGHTS = (0.5, 2.0, 4.0)
MOST_WORDS = (6, 8, 20)
EXPANSIONS = (5, 10)  # words added from the first FEEDBACK documents
FEEDBACK = 3


def _texts(index: Path) -> dict[int, str]:
    """Each chunk's section path and text, as keyword search indexes them."""
    from pocketmcp.store.sqlite.connect import open_sync_reader

    conn = open_sync_reader(index)
    try:
        return {int(c): f"{sec or title}\n{text}" for c, sec, title, text in conn.execute(
            "SELECT c.chunk_id, c.section, d.title, substr(d.content, c.start_off + 1, "
            "c.end_off - c.start_off) FROM chunks c JOIN documents d USING (doc_id)")}
    finally:
        conn.close()


def expansion(text: str, docs: list[str], df: Mapping[str, int], total: int, n: int
              ) -> list[str]:
    """The `n` words that best stand for the feedback documents `docs` (best first): each
    word's share of a document's words, summed over the documents, times its idf; the
    query's own words, stop words, numbers and words of one or two letters are left out."""
    import math
    import re
    from collections import Counter

    from pocketmcp.core.keywords import STOPWORDS

    asked = set(re.findall(r"\w+", text.lower()))
    weight: Counter[str] = Counter()
    for doc in docs:
        words = [w for w in re.findall(r"[^\W\d_]{3,}", doc.lower()) if w not in STOPWORDS]
        for w, c in Counter(words).items():
            if w not in asked:
                weight[w] += c / max(1, len(words))
    scored = {w: v * math.log(total / (1 + df.get(w, 0))) for w, v in weight.items()
              if df.get(w, 0) < 0.1 * total}
    return sorted(scored, key=lambda w: (-scored[w], w))[:n]


def _chunk_ids(index: Path) -> list[int]:
    """Every chunk id of the SQLite index at `index`, ascending (ids only grow, with gaps
    where chunks were replaced: read, not guessed)."""
    from pocketmcp.store.sqlite.connect import open_sync_reader

    conn = open_sync_reader(index)
    try:
        return [row[0] for row in conn.execute("SELECT chunk_id FROM chunks ORDER BY chunk_id")]
    finally:
        conn.close()


async def _gather(index: Path, dataset: Any, name_of: Callable[[str], str]
                  ) -> tuple[Cache, np.ndarray, np.ndarray]:
    from pocketmcp.core.paths import path_of
    from pocketmcp.embed.background import model_background
    from pocketmcp.search.retrieve import retrieve

    async with data.reading(index) as reading:
        index_ = reading.index
        ids = await index_.run(lambda r: r.all_external_ids())
        names = {d: name_of(path_of(ext, "file") or ext) for d, ext in ids}
        every = await anyio.to_thread.run_sync(_chunk_ids, index)
        chunk_ids, chunk_docs, vectors = await index_.run(
            lambda r: r.vectors_by_ids(every, index_.dim))
        background = await model_background(reading.embedder)
        texts = await anyio.to_thread.run_sync(_texts, index)
        df, doc_text = _word_counts(texts, chunk_docs.tolist(), chunk_ids.tolist())
        matrix = np.asarray(vectors, dtype=np.float32)
        queries: dict[str, Any] = {}
        qvecs = []
        seconds: dict[str, float] = {}

        async def words(name: str, text: str, **params: Any) -> dict[str, Any]:
            started = time.perf_counter()
            stage = (await retrieve(reading, text, mode="keyword", depth=DEPTH,
                                    unique_docs=True, params=Params(**params))).stage
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started
            return {"keyword": stage.keyword, "doc_of": stage.doc_of,
                    "doc_keyword": stage.doc_keyword, "first_chunk": stage.first_chunk,
                    "ref": stage.keyword_ref}

        for n, (qid, text) in enumerate(dataset.queries.items()):
            base = await words("default", text)
            qvec = await reading.embedder.embed_query(text)
            qvecs.append(qvec)
            variants = {f"tw{w}": await words(f"tw{w}", text, title_weight=w)
                        for w in TITLE_WEIGHTS}
            for most in MOST_WORDS:
                with _most_words(most):
                    variants[f"most{most}"] = await words(f"most{most}", text)
            started = time.perf_counter()
            first = _first_docs(base, matrix, qvec, chunk_ids, chunk_docs, background)
            feedback = [doc_text[d] for d in first[:FEEDBACK]]
            added = expansion(text, feedback, df, len(texts), max(EXPANSIONS))
            seconds["expansion_terms"] = seconds.get("expansion_terms", 0.0) + (
                time.perf_counter() - started)
            for k in EXPANSIONS:
                with _most_words(12 + k):
                    variants[f"rm{k}"] = await words(f"rm{k}", " ".join(added[:k]))
            queries[qid] = {"text": text, **base, "variants": variants, "added": added}
            if n % 200 == 0:
                print(f"gathered {n}/{len(dataset.queries)}", file=sys.stderr, flush=True)
    cache = Cache(names, chunk_ids.tolist(), chunk_docs.tolist(), background, queries,
                  texts, seconds)
    return cache, np.asarray(vectors, dtype=np.float32), np.stack(qvecs).astype(np.float32)


def _word_counts(texts: Mapping[int, str], docs: list[int], ids: list[int]
                 ) -> tuple[dict[str, int], dict[int, str]]:
    """Chunks holding each word (as `expansion` splits words), and each document's text."""
    import re
    from collections import Counter

    df: Counter[str] = Counter()
    for text in texts.values():
        df.update(set(re.findall(r"[^\W\d_]{3,}", text.lower())))
    by_doc: dict[int, list[str]] = {}
    for chunk, doc in zip(ids, docs, strict=True):
        by_doc.setdefault(doc, []).append(texts.get(chunk, ""))
    return dict(df), {d: "\n".join(t) for d, t in by_doc.items()}


def _first_docs(base: dict[str, Any], matrix: np.ndarray, qvec: np.ndarray,
                chunk_ids: np.ndarray, chunk_docs: np.ndarray, background: float) -> list[int]:
    """The default hybrid search's documents, best first (one match per document)."""
    from pocketmcp.core import fusion
    from pocketmcp.search.fuse import Stage, fuse

    scores = matrix @ qvec
    top = np.argpartition(-scores, min(DEPTH, len(scores) - 1))[:DEPTH]
    vector = {int(chunk_ids[i]): float(scores[i]) for i in top}
    doc_of = {**{int(chunk_ids[i]): int(chunk_docs[i]) for i in top}, **base["doc_of"]}
    stage = Stage(vector, dict(base["keyword"]), doc_of, dict(base["doc_keyword"]),
                  dict(base["first_chunk"]), base["ref"], background)
    fused = fuse(stage, "hybrid", Params(), True)
    return [stage.doc_of[c] for c in fusion.ranked(fused)]


class _most_words:
    """The keyword stage searches at most `most` of a query's words, meanwhile."""

    def __init__(self, most: int) -> None:
        from pocketmcp.core import keywords

        self.defaults = keywords.query_words.__kwdefaults__
        assert self.defaults is not None
        self.most, self.was = most, self.defaults["most"]

    def __enter__(self) -> None:
        self.defaults["most"] = self.most

    def __exit__(self, *exc: object) -> None:
        self.defaults["most"] = self.was


HEADING_WEIGHTS = (2.0, 4.0, 8.0)


def heading_lists(index: Path, texts: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per query, whole-document BM25 with the document's headings as a field of their own
    (FTS5's bm25() weights per column: title 1, headings w, text 1), for each w of
    HEADING_WEIGHTS: {qid: {w: {doc_id: score}}}. The query's words are the keyword stage's
    own (its rarest words, FTS5's counts of chunks); the table is a temporary copy."""
    from pocketmcp.core.chunking import sections
    from pocketmcp.core.keywords import match_of, query_words, terms, vocab_terms
    from pocketmcp.store.sqlite.connect import sqlite_module

    conn = sqlite_module().connect("file::memory:", uri=True)
    try:
        conn.execute("ATTACH ? AS src", (f"file:{index}?mode=ro",))
        conn.execute("CREATE VIRTUAL TABLE docs3 USING fts5(title, headings, content, "
                     "tokenize='porter unicode61 remove_diacritics 2')")
        for doc_id, title, content in conn.execute(
                "SELECT doc_id, title, content FROM src.documents").fetchall():
            heads = " \n".join(dict.fromkeys(
                p.rsplit(" > ", 1)[-1] for p in sections(content)[1]))
            conn.execute("INSERT INTO docs3(rowid, title, headings, content) "
                         "VALUES (?, ?, ?, ?)", (doc_id, title, heads, content))
        total = conn.execute("SELECT count(*) FROM src.chunks").fetchone()[0]
        out: dict[str, dict[str, Any]] = {}
        for qid, text in texts.items():
            words = terms(text)
            df = {}
            for term in vocab_terms(words):
                row = conn.execute("SELECT doc FROM src.chunks_vocab WHERE term = ?",
                                   (term,)).fetchone()
                if row and row[0] is not None:
                    df[term] = int(row[0])
            kept = query_words(text, df, total) if words else []
            out[qid] = {}
            for w in HEADING_WEIGHTS:
                out[qid][str(w)] = dict(conn.execute(
                    "SELECT rowid, -bm25(docs3, 1.0, ?, 1.0) AS s FROM docs3 WHERE docs3 "
                    "MATCH ? ORDER BY s DESC LIMIT ?", (w, match_of(kept), DEPTH)).fetchall()
                ) if kept else {}
        return out
    finally:
        conn.close()


def load_set(index: Path, dataset_dir: Path, cache_dir: Path, folder_names: bool
             ) -> candidates.Corpus:
    """The set's cached lists (read from `index` the first time)."""
    from pocketmcp.ops.evaluate import doc_of, load_dataset

    dataset = load_dataset(dataset_dir, corpus=not folder_names)
    base = cache_dir / index.name
    meta, arrays = base.with_suffix(".qcache2"), base.with_suffix(".qcache2.npz")
    if meta.exists() and arrays.exists():
        cache = msgspec.msgpack.decode(meta.read_bytes(), type=Cache)
        found = np.load(arrays)
        vectors, qvecs = found["vectors"], found["queries"]
    else:
        cache, vectors, qvecs = anyio.run(_gather, index, dataset,
                                          str if folder_names else doc_of)
        meta.write_bytes(msgspec.msgpack.encode(cache))
        np.savez(arrays, vectors=vectors, queries=qvecs)
    heads = base.with_suffix(".hcache")
    if heads.exists():
        found_heads = msgspec.msgpack.decode(heads.read_bytes())
    else:
        found_heads = heading_lists(index, dict(dataset.queries))
        heads.write_bytes(msgspec.msgpack.encode(found_heads))
    corpus = candidates.Corpus.make(cache, vectors, qvecs, dataset.qrels)
    corpus.heading_lists = found_heads
    return corpus
