"""The chunk keyword query scored in numpy against FTS5's own bm25(), on real indexes."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pocketmcp.core.identity import Identity
from pocketmcp.core.text import sha256
from pocketmcp.messages import Chunk, DocRecord
from pocketmcp.store.sqlite import halves
from pocketmcp.store.sqlite.keywords import bm25, lengths
from pocketmcp.store.sqlite.queries import SqliteReader
from pocketmcp.store.sqlite.writes import SqliteWriter

DIM = 8
WORDS = ["owl", "river", "bread", "yeast", "heron", "running", "runs", "stone", "lantern",
         "copper", "maple", "thistle", "glacier", "ember", "falcon", "willow"]


def _text(rng: random.Random) -> str:
    # Lengths from 3 to 120 words, a few words repeated many times.
    words = [rng.choice(WORDS) if rng.random() < 0.3 else f"w{rng.randrange(400)}"
             for _ in range(rng.randint(3, 120))]
    if rng.random() < 0.1:
        words += [rng.choice(WORDS)] * rng.randint(5, 30)
    return " ".join(words)


def _write(db: Path, docs: dict[str, tuple[str, str]], removed: tuple[str, ...] = ()) -> None:
    """Upsert `docs` (external id: (title, text)) and remove `removed`, in one commit."""
    writer = SqliteWriter(db, Identity(model="m", dim=DIM))
    try:
        writer.begin()
        for n, (external, (title, text)) in enumerate(docs.items()):
            vec = np.random.default_rng(n).normal(size=(1, DIM)).astype(np.float32)
            writer.upsert(DocRecord(external_id=external, source="raw", uri=None, title=title,
                                    content=text, sha256=sha256(title + text)),
                          (Chunk(idx=0, start=0, end=len(text), text=text, tokens=5,
                                 sha256=sha256(text)),),
                          (vec / np.linalg.norm(vec)).tobytes())
        for external in removed:
            writer.delete(external)
        writer.commit()
    finally:
        writer.close()


def _docs(seed: int, count: int, prefix: str = "d") -> dict[str, tuple[str, str]]:
    rng = random.Random(seed)
    # Titles hold query words too, some twice: the title weight applies per occurrence.
    return {f"{prefix}{i}": (" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))),
                             _text(rng)) for i in range(count)}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "index.db"
    # One title word and 35 in the text: 1.4554533625603243 + 1.0 + ... (bm25()'s way)
    # is not 1.4554533625603243 + 35.0 to the last bit.
    _write(path, {**_docs(1, 300), "heavy": ("glacier", " ".join(["glacier"] * 35))})
    return path


@pytest.fixture
def scored(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Counts the queries scored in numpy and the times every length was read."""
    counts = {"scored": 0, "read": 0}
    score, read = bm25.score, lengths.read_lengths

    def spy_score(*args: Any, **kwargs: Any) -> Any:
        out = score(*args, **kwargs)
        counts["scored"] += out is not None
        return out

    def spy_read(conn: Any) -> Any:
        counts["read"] += 1
        return read(conn)

    monkeypatch.setattr(bm25, "score", spy_score)
    monkeypatch.setattr(lengths, "read_lengths", spy_read)
    yield counts


def _match(words: list[str]) -> str:
    return " OR ".join(f'"{w}"' for w in words)


def _both(reader: SqliteReader, words: list[str], k: int, weight: float
          ) -> tuple[list[tuple[int, float, int]], list[tuple[int, float, int]]]:
    """(numpy's answer, FTS5's answer) to the same query."""
    fast = reader.search_keyword(_match(words), k, title_weight=weight, words=words)
    slow = halves.chunk_rows(reader._conn, reader.db_path, "", [weight, _match(words), k])
    return fast, slow


def _cut(rows: list[tuple[int, float, int]], k: int) -> list[tuple[int, float, int]]:
    """FTS5 keeps any of the rows tied at its cut: compare above the last score only."""
    if len(rows) < k:
        return rows
    return [r for r in rows if r[1] > rows[-1][1]]


@pytest.mark.parametrize("weight", [1.0, 1.7, 0.1, 1.4554533625603243])
@pytest.mark.parametrize("k", [5, 40, 1000])
def test_scores_are_fts5s_own_to_the_last_bit(db: Path, scored: dict[str, int],
                                              weight: float, k: int) -> None:
    rng = random.Random(k + int(weight * 10))
    reader = SqliteReader(db)
    try:
        for n in range(25):
            words = ["glacier"] if n == 0 else rng.sample(WORDS, rng.randint(1, 5))
            fast, slow = _both(reader, words, k, weight)
            assert len(fast) == len(slow) and _cut(fast, k) == _cut(slow, k)
            assert [s for _, s, _ in fast] == [s for _, s, _ in slow]  # bit for bit
    finally:
        reader.close()
    assert scored == {"scored": 25, "read": 1}  # all scored in numpy, lengths read once


def test_two_words_of_one_stem_count_as_two_phrases(db: Path, scored: dict[str, int]) -> None:
    reader = SqliteReader(db)
    try:
        fast, slow = _both(reader, ["running", "runs"], 50, 1.0)
        alone, _ = _both(reader, ["running"], 50, 1.0)
    finally:
        reader.close()
    assert fast == slow and scored["scored"] == 2
    assert fast[0][1] == pytest.approx(2 * alone[0][1])  # "run" scored once for each


@pytest.mark.parametrize("spread", [4, 0])  # held by id, and as sorted ids
def test_lengths_follow_the_chunk_log_through_changes(
        db: Path, scored: dict[str, int], monkeypatch: pytest.MonkeyPatch, spread: int) -> None:
    monkeypatch.setattr(lengths.Sizes, "SPREAD", spread)
    monkeypatch.setattr(lengths.Sizes, "SLACK", 0)
    reader = SqliteReader(db)
    try:
        assert _both(reader, ["owl", "falcon"], 30, 1.7)[0] != []
        for step in range(3):
            changed = {f"d{i}": ("owl heron", _text(random.Random(100 * step + i)))
                       for i in range(step, 300, 7)}
            _write(db, {**changed, **_docs(step, 5, prefix=f"new{step}-")},
                   removed=tuple(f"d{i}" for i in range(step + 3, 300, 11)))
            for words in (["owl", "falcon"], ["heron"], ["maple", "runs", "ember"]):
                fast, slow = _both(reader, words, 30, 1.7)
                assert _cut(fast, 30) == _cut(slow, 30) and len(fast) == len(slow)
    finally:
        reader.close()
    assert scored == {"scored": 10, "read": 1}  # followed, never read whole again


def test_lengths_are_read_whole_again_past_the_catch_up_limit(
        db: Path, scored: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lengths.ChunkLengths, "CATCH_UP", 4)
    reader = SqliteReader(db)
    try:
        _both(reader, ["owl"], 20, 1.0)
        _write(db, _docs(9, 10, prefix="more"))  # 10 chunks added: 10 log entries
        fast, slow = _both(reader, ["owl", "thistle"], 20, 1.0)
    finally:
        reader.close()
    assert _cut(fast, 20) == _cut(slow, 20) and scored == {"scored": 2, "read": 2}


def test_a_large_index_is_read_in_the_background_and_fts5_answers_meanwhile(
        db: Path, scored: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lengths.ChunkLengths, "READ_AT_ONCE", 10)
    reader = SqliteReader(db)
    try:
        first, slow = _both(reader, ["lantern", "copper"], 20, 1.0)
        assert _cut(first, 20) == _cut(slow, 20) and scored["scored"] == 0
        deadline = time.monotonic() + 30
        while scored["scored"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
            later, slow = _both(reader, ["lantern", "copper"], 20, 1.0)
        assert scored["scored"] == 1 and later == first
    finally:
        reader.close()
    assert scored["read"] == 1


def test_phrases_and_filtered_queries_go_to_fts5(db: Path, scored: dict[str, int]) -> None:
    _write(db, {"p": ("owl_river notes", "owl_river and owl river")})
    reader = SqliteReader(db)
    try:
        # Two tokens in one word: a phrase, which only FTS5 matches as one.
        phrase = reader.search_keyword('"owl_river"', 10, words=["owl_river"])
        assert [r[0] for r in phrase] == [r[0] for r in halves.chunk_rows(
            reader._conn, db, "", [1.0, '"owl_river"', 10])] != []
        some = reader.search_keyword('"owl"', 10, [1, 2, 3], words=["owl"])
        assert {r[2] for r in some} <= {1, 2, 3}
    finally:
        reader.close()
    assert scored["scored"] == 0


@pytest.mark.parametrize("spread", [4, 0])  # held by id, and as sorted ids
def test_a_chunk_of_unknown_length_is_not_scored(spread: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lengths.Sizes, "SPREAD", spread)
    monkeypatch.setattr(lengths.Sizes, "SLACK", 0)

    def sizes(ids: list[int], counts: list[int]) -> lengths.Sizes:
        held = lengths.Sizes(np.array(ids, np.int64), np.array(counts, np.int64))
        assert (held.ids is None) == (spread > 0)
        return held

    term = [(np.array([1, 3], np.int64), np.array([1.0, 2.0]), 0.5)]
    assert bm25.score(term, sizes([3, 1], [7, 5]), 2, 12, 10) is not None
    assert bm25.score(term, sizes([1, 2], [5, 7]), 2, 12, 10) is None
    assert bm25.score(term, sizes([1], [5]), 2, 12, 10) is None
    assert bm25.score(term, sizes([1, 4], [5, 7]), 2, 12, 10) is None
    changed = sizes([1, 2, 4], [5, 6, 7]).changed([2, 4], np.array([3]), np.array([9]))
    assert [a.tolist() for a in changed.items()] == [[1, 3], [5, 9]]


def test_varints_and_averages_read_as_sqlite_writes_them() -> None:
    data = np.frombuffer(b"\x05\x87\x66\x81\x80\x00\x7f", np.uint8)
    assert lengths.varints(data).tolist() == [5, 998, 16384, 127]
    with pytest.raises(ValueError, match="cut short"):
        lengths.varints(np.frombuffer(b"\x05\x87", np.uint8))
    with pytest.raises(ValueError, match="longer"):
        lengths.varints(np.frombuffer(b"\x81\x81\x81\x81\x01", np.uint8))
    assert lengths.averages(b"\x82\x2c\x0a\x87\x66") == (300, 1008)


def test_a_terms_frequency_adds_occurrences_one_at_a_time_title_first(db: Path) -> None:
    weight = 1.4554533625603243
    reader = SqliteReader(db)
    try:
        ids, freq = bm25.occurrences(reader._conn, "glacier", weight)
        expected: dict[int, float] = {}
        for doc, col in reader.query(f"SELECT doc, col FROM {bm25.INSTANCES} "
                                     "WHERE term = 'glacier' ORDER BY doc, col = 'text', offset"):
            expected[doc] = expected.get(doc, 0.0) + (weight if col == "title" else 1.0)
    finally:
        reader.close()
    assert ids.tolist() == sorted(expected) and freq.tolist() == [expected[i] for i in ids]
    heavy = freq[np.argmax(freq)]
    assert heavy == 36.45545336256032 != weight + 35.0  # the sum is not the product


def test_the_keyword_stage_scores_in_numpy_from_enough_postings(
        db: Path, scored: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    reader = SqliteReader(db)
    try:
        kwargs: dict[str, Any] = {"title_weight": 1.7, "total": 301, "documents": False}
        few = reader.keyword_stage("falcon lantern", 20, None, **kwargs)
        assert scored["scored"] == 0  # under FROM_POSTINGS: FTS5
        monkeypatch.setattr(bm25, "FROM_POSTINGS", 1)
        many = reader.keyword_stage("falcon lantern", 20, None, **kwargs)
        assert scored["scored"] == 1 and _cut(list(many.keyword.items()), 20) == _cut(
            list(few.keyword.items()), 20)
        assert reader.keyword_stage("東京 falcon", 20, None, **kwargs) is not None
        assert scored["scored"] == 1  # a CJK word: FTS5
    finally:
        reader.close()


def test_lengths_read_ahead_at_start_up_serve_the_first_query(
        db: Path, scored: dict[str, int]) -> None:
    held = lengths.ChunkLengths()
    held.prefetch(db)
    assert held._reader is not None
    held._reader.join(30)  # the read made ahead is done
    reader = SqliteReader(db, lengths=held)
    try:
        fast, slow = _both(reader, ["owl", "stone"], 20, 1.0)
    finally:
        reader.close()
        held.close()
    assert _cut(fast, 20) == _cut(slow, 20)
    assert scored == {"scored": 1, "read": 1}  # the read was the one made ahead


def test_lengths_that_cannot_be_read_are_not_tried_on_every_query(
        db: Path, scored: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(conn: Any) -> Any:
        scored["read"] += 1
        raise ValueError("a varint longer than 4 bytes")

    monkeypatch.setattr(lengths, "read_lengths", broken)
    reader = SqliteReader(db)
    try:
        for words in (["owl"], ["ember", "falcon"], ["owl"]):
            fast, slow = _both(reader, words, 20, 1.0)
            assert _cut(fast, 20) == _cut(slow, 20)  # FTS5 answered
    finally:
        reader.close()
    assert scored == {"scored": 0, "read": 1}
