"""Postgres holds a chunk's words as SQLite's FTS5 does (porter stems of unicode61 tokens,
diacritics removed, stop words kept) and counts its length in them, so the same corpus on a
real SQLite file and a real Postgres with pgvector gives the same chunks for a query, in the
same order, with the same BM25 scores; an index written before gets its words on open."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.records import DIM, IDENTITY
from support.records import doc as _doc
from support.records import unit_vectors as _vectors

from pocketmcp.core.secret import Secret
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk
from pocketmcp.store.api import Place
from pocketmcp.store.pg import connect
from pocketmcp.store.pg import schema as schema_module
from pocketmcp.store.pg.place import PgPlace
from pocketmcp.store.sqlite.place import SqlitePlace

# (external id, title, [(section path, text)]). Words that Postgres's `english`
# configuration reads otherwise: file names and versions (one token there, two here),
# hyphenated words, stop words (dropped there, counted here in every length), accents.
CORPUS = [
    ("config", "Configuration", [
        ("Configuration > Files", "Settings live in hatch.toml or in the pyproject-toml "
                                  "table; the one that is found first is the one used."),
        ("Configuration > Matrix", "A matrix of environments runs the tests for each "
                                   "Python version, e.g. 3.12 and 3.13, on x86_64 too.")]),
    ("env", "Environments", [
        ("", "Environments are isolated: each one has its own dependencies and scripts."),
        ("Environments > Matrix", "The matrix is expanded into one environment per "
                                  "combination, and it is all done for you by the tool.")]),
    ("cafe", "Café notes", [
        ("", "The café near the station serves naïve coffee from a toml-shaped cup."),
        ("Café notes > Menu", "Tea, coffee and cake; it is open until it is dark.")]),
    *[(f"filler{i}", f"Filler {i}", [
        ("", f"Kingfishers perch above stream number {i} at noon, as they do."),
        (f"Filler {i} > Ducks", f"Ducks float on pond number {i} in the evening.")])
      for i in range(5)],
]
QUERIES = ["toml matrix environments", "cafe naive coffee", "pyproject x86_64 python",
           "hatch.toml"]


def _write(place: Place) -> dict[int, str]:
    """The corpus written to `place`; each chunk's model tokens are its characters (not
    what BM25 counts). Doc id -> external id."""
    writer = place.writer(IDENTITY)
    names: dict[int, str] = {}
    try:
        for ext, title, parts in CORPUS:
            chunks, start = [], 0
            for i, (section, text) in enumerate(parts):
                chunks.append(Chunk(idx=i, start=start, end=start + len(text), text=text,
                                    tokens=len(text), sha256=sha256(text), section=section))
                start += len(text)
            doc = _doc(ext, *(t for _, t in parts), title=title)
            vectors = _vectors(len(chunks), seed=len(names)).tobytes()
            written = writer.batch(lambda d=doc, c=tuple(chunks), v=vectors: writer.upsert(
                d, c, v), [ext])
            names[written.doc_id] = ext
    finally:
        writer.close()
    return names


async def _chunks(place: Place, names: dict[int, str], title_weight: float
                  ) -> dict[str, tuple[list[tuple[str, int, float]], float]]:
    """Per query: the chunks found, best first, as (document, position, score), and the
    scale's reference."""
    index = place.reader(DIM)
    out = {}
    try:
        for query in QUERIES:
            found = await index.run(lambda r, q=query: r.keyword_stage(
                q, 50, None, title_weight=title_weight, total=16, documents=False))
            ranked = sorted(found.keyword.items(), key=lambda item: -item[1])
            out[query] = ([(names[found.doc_of[c]],
                            (await index.run(lambda r, c=c: r.chunk(c))).idx, s)  # type: ignore
                           for c, s in ranked], found.reference)
    finally:
        index.close()
    return out


@pytest.mark.parametrize("title_weight", [1.0, 2.5])
async def test_both_stores_score_chunks_alike_over_the_same_terms(
        tmp_path: Path, pg_url: str, pg_schema: str, title_weight: float) -> None:
    sqlite_place = SqlitePlace(tmp_path / "index.db", tmp_path / "databases")
    sqlite = await _chunks(sqlite_place, _write(sqlite_place), title_weight)
    pg_place = PgPlace(Secret(pg_url), pg_schema)
    postgres = await _chunks(pg_place, _write(pg_place), title_weight)
    # File names and hyphenated words are split: "hatch" and "toml", any of them.
    assert [d for d, _, _ in sqlite["hatch.toml"][0]] == ["config", "cafe"]
    assert ("cafe", 0) in {(d, i) for d, i, _ in sqlite["cafe naive coffee"][0]}
    for query in QUERIES:
        want, reference = sqlite[query]
        got, got_reference = postgres[query]
        assert want, query
        assert [(d, i) for d, i, _ in got] == [(d, i) for d, i, _ in want], query
        assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], rel=1e-9), (
            query, got, want)
        assert got_reference == pytest.approx(reference, rel=1e-9)


async def test_a_postgres_index_written_before_gets_its_words_as_fts5_holds_them(
        pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    where = PgPlace(Secret(pg_url), pg_schema)
    before = next(i for i, steps in enumerate(schema_module.MIGRATIONS)
                  if "ALTER TABLE chunks ALTER COLUMN tsv DROP EXPRESSION" in steps)
    with monkeypatch.context() as patch:  # the index as the schema before made it
        patch.setattr(schema_module, "MIGRATIONS", schema_module.MIGRATIONS[:before])
        patch.setattr(schema_module, "SCHEMA_VERSION", before)
        where.writer(IDENTITY).close()
    text = "Settings live in hatch.toml, the one that is found first is used."
    with connect.connect(where, autocommit=True) as conn:
        row = conn.execute(
            b"INSERT INTO documents(external_id, source, content, content_sha256, "
            b"chunk_count, created_at, updated_at) VALUES ('old', 'file', %s, 'x', 1, 'x', "
            b"'x') RETURNING doc_id", (text,)).fetchone()
        assert row is not None
        conn.execute(b"INSERT INTO chunks(doc_id, idx, start_off, end_off, tokens, "
                     b"text_sha256, title, section, words, embedding) VALUES (%s, 0, 0, %s, "
                     b"99, 'x', 'Configuration', 'Configuration > Files', %s, NULL)",
                     (row[0], len(text), text))
        # Postgres's `english` configuration reads "hatch.toml" as one word, "the" as none.
        words = conn.execute(b"SELECT tsvector_to_array(tsv) FROM chunks").fetchone()
        assert words is not None and "toml" not in words[0] and "the" not in words[0]
    where.writer(IDENTITY).close()  # migrates
    with connect.connect(where, autocommit=True) as conn:
        got = conn.execute(b"SELECT tsvector_to_array(tsv), title_terms, text_terms "
                           b"FROM chunks").fetchone()
    assert got is not None
    assert {"hatch", "toml", "the", "configur", "file", "found"} <= set(got[0])
    assert got[1:] == (2, 13)  # "Configuration > Files"; the text's 13 tokens
    index = where.reader(DIM)
    try:
        found = await index.run(lambda r: r.keyword_stage(
            "toml", 10, None, title_weight=1.0, total=1, documents=False))
    finally:
        index.close()
    assert list(found.doc_of.values()) == [row[0]]


def test_a_text_that_fails_to_tokenize_leaves_later_ones_tokenized() -> None:
    """A lone surrogate fails its batch; the next batch is tokenized as ever (no row of the
    failed one left behind to collide with)."""
    from pocketmcp.store.pg import tokens

    with pytest.raises(UnicodeEncodeError):
        tokens.terms(["good words here", "bad \ud800 text"])
    assert tokens.terms(["again words"]) == [["again", "word"]]
