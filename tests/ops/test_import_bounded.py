"""An import reads each line with a cap and checks every hash, size and the chunks' coverage
of their document: a refusal names its line with the code IMPORT_REFUSED, and the index's
files are byte for byte as they were. On a real index and real files."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.runtime import fake, make_config, running, vector_file_settled
from support.tools import Tools

from pocketmcp.core.identity import Identity
from pocketmcp.errors import ImportRefused
from pocketmcp.messages import PreparedDoc
from pocketmcp.ops import archive
from pocketmcp.ops.archive_check import HEADER_CAP, chunk_digest, header


def _files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(db.parent.iterdir())
            if p.name in (db.name, db.name + "-wal", db.name + ".vectors")}


def _differ(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The files that are not byte for byte as they were: each with its first changed
    offset and both sizes (the files themselves are megabytes of mostly zeros)."""
    def first(a: bytes, b: bytes) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                    min(len(a), len(b)))

    return [f"{name}: at byte {first(before.get(name, b''), after.get(name, b''))}, "
            f"{len(before.get(name, b''))} -> {len(after.get(name, b''))} bytes"
            for name in sorted(before.keys() | after.keys())
            if before.get(name) != after.get(name)]


def _changed(lines: list[str], change: Callable[[dict[str, Any]], None]) -> list[str]:
    item = json.loads(lines[1])
    change(item)
    return [lines[0], json.dumps(item), *lines[2:]]


def _uncovered(item: dict[str, Any]) -> None:
    item["content"] += " and then a long tail that no chunk holds" * 50


def _zz(item: dict[str, Any]) -> None:
    item["sha256"] = "zz"


def _chunk_hash(item: dict[str, Any]) -> None:
    item["chunks"][0]["sha256"] = chunk_digest("some other text", "")


def _big(item: dict[str, Any]) -> None:
    item["content"] = "words " * 400_000  # 2.4 MB, over MAX_FILE_MB=2
    item["chunks"] = []


def _big_file(item: dict[str, Any]) -> None:
    item["size_bytes"] = 3 * 2**20


# Each: what is changed on line 2 (the one document), and what the refusal says.
REFUSALS: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (_zz, "sha256 'zz' is not a SHA-256 digest"),
    (_chunk_hash, "chunk 0's sha256 is not the digest of its text"),
    (_uncovered, "characters 35-2085 of its content are in no chunk"),
    (_big, "its content is over MAX_FILE_MB"),
    (_big_file, "size_bytes .* over MAX_FILE_MB"),
]


async def test_every_hash_size_and_coverage_is_checked_and_the_index_kept(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    export = tmp_path / "e.jsonl"
    async with running(config, embedding=fake(config)) as rt:
        await Tools(rt).add(("doc", "Otters hold hands while they sleep."))
        await archive.export(config.main_place(), export)
        await Tools(rt).add(("doc", "Herons stand still for hours."))
        await vector_file_settled(rt)
        db = config.store.sqlite_path
        assert db is not None
        before = _files(db)
        lines = export.read_text().splitlines()
        for change, message in REFUSALS:
            bad = tmp_path / f"{change.__name__}.jsonl"
            bad.write_text("\n".join(_changed(lines, change)) + "\n")
            with pytest.raises(ImportRefused, match=f"line 2: {message}") as refused:
                await archive.import_file(rt.writing, bad, identity=rt.services.identity,
                                          max_bytes=2 * 2**20)
            assert refused.value.code == "IMPORT_REFUSED" and refused.value.line == 2
            assert "nothing was imported" in str(refused.value)
            changed = _differ(before, _files(db))
            assert not changed, change.__name__
        done = await archive.import_file(rt.writing, export, identity=rt.services.identity)
        assert done.documents == 1


async def test_a_line_that_never_ends_is_refused_at_the_cap(tmp_path: Path) -> None:
    """/dev/zero (a first line without end) and a document line past the cap are refused
    after reading about the cap, not read until memory runs out."""
    config = make_config(tmp_path)
    export = tmp_path / "e.jsonl"
    async with running(config, embedding=fake(config)) as rt:
        await Tools(rt).add(("doc", "Otters hold hands while they sleep."))
        await archive.export(config.main_place(), export)
        await vector_file_settled(rt)
        db = config.store.sqlite_path
        assert db is not None
        before = _files(db)
        with pytest.raises(ImportRefused, match=f"line 1: longer than {HEADER_CAP} bytes"):
            await archive.import_file(rt.writing, Path("/dev/zero"),
                                      identity=rt.services.identity)
        header = export.read_text().splitlines()[0]
        long = tmp_path / "long.jsonl"
        with open(long, "w") as out:
            out.write(header + "\n" + '{"type": "document", "content": "' + "x" * 5_000_000)
        with pytest.raises(ImportRefused, match="line 2: longer than") as refused:
            await archive.import_file(rt.writing, long, identity=rt.services.identity,
                                      max_bytes=2**20, most_chunks=10)
        assert refused.value.line == 2
        changed = _differ(before, _files(db))
        assert not changed


def test_the_documents_read_hold_each_text_once(tmp_path: Path) -> None:
    """Read and checked, an export's document is held as its text alone: its chunks cut
    theirs when the writer takes them, one at a time (a second copy of the whole text
    before). Python's own allocations, measured while a 4 MB document is read."""
    words = "lichen basalt quartz tundra heron otter comet glacier "
    text = words * (4 * 2**20 // len(words))
    step = len(text) // 200
    spans = [(start, min(len(text), start + step)) for start in range(0, len(text), step)]
    chunks = [{"idx": i, "start": s, "end": e, "tokens": 1, "section": "",
               "sha256": chunk_digest(text[s:e], ""), "vector": None}
              for i, (s, e) in enumerate(spans)]
    doc = {"type": "document", "external_id": "big", "source": "raw", "uri": None,
           "title": "Big", "library": "default", "metadata": {}, "properties": {}, "tags": [],
           "created": None, "modified": None, "links": [], "content": text,
           "sha256": "0" * 64, "size_bytes": None, "mtime_ns": None, "chunks": chunks}
    identity = Identity(model="m", dim=4)
    export = tmp_path / "e.jsonl"
    export.write_text("\n".join([
        json.dumps({"format": "pocketmcp-export", "version": 1, "model_id": "m", "dim": 4}),
        json.dumps(doc),
        json.dumps({"type": "end", "documents": 1, "chunks": len(chunks),
                    "waiting": len(chunks)})]) + "\n")
    del doc, chunks
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        same, docs = archive._read(export, identity, (), (8 * 2**20, 1000))
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert same
    (prepared,) = docs
    assert isinstance(prepared, PreparedDoc) and prepared.waiting
    assert held - before < 1.25 * len(text)  # the text once (twice before)
    assert peak - before < 2.25 * len(text)  # the line and its text, while it is decoded
    # The chunks are the document's, cut when read: each its stretch of the text.
    made = list(prepared.chunks)
    assert len(made) == len(spans) == len(prepared.chunks)
    assert [(c.idx, c.start, c.end, c.text) for c in made] == [
        (i, s, e, text[s:e]) for i, (s, e) in enumerate(spans)]
    assert prepared.chunks[3].text == text[spans[3][0]:spans[3][1]]
    assert [c.idx for c in prepared.chunks[1:3]] == [1, 2]


@pytest.mark.parametrize(("line", "said"), [
    (b'{"format": "pocketmcp-export", "version": 2}',
     "is export format version 2; this PocketMCP reads version 1"),
    (b'{"format": "pocketmcp-export", "version": 1, "model_id": "m"}',
     "line 1: the pocketmcp-export header does not hold what it must: .*dim"),
    (b"# README\n", "is not a PocketMCP export: its first line is not the pocketmcp-export"),
    (b'{"format": "other", "version": 1}', "is not a PocketMCP export"),
])
def test_a_header_says_what_is_wrong_with_it(line: bytes, said: str) -> None:
    with pytest.raises(ImportRefused, match=said) as refused:
        header(line, Path("e.jsonl"), 1)
    assert refused.value.code == "IMPORT_REFUSED" and refused.value.line == 1


def test_a_refused_import_into_a_new_index_leaves_no_index_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pocketmcp import` of a cut file, told an index that is not there yet: refused, and
    the index it made to take the documents is gone with the refusal."""
    from pocketmcp import logs
    from pocketmcp.cli import main

    monkeypatch.setattr(logs, "configure", lambda level: None)  # see tests/commands/test_setup
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"format": "pocketmcp-export", "version": 1, "model_id": "m", "dim": 4}\n'
                   '{"type": "document", "external_id": "a", "cont')
    folder = tmp_path / "new"
    monkeypatch.setenv("SQLITE_PATH", str(folder / "index.db"))
    assert main(["import", str(cut)]) == 1
    assert not folder.exists() or list(folder.iterdir()) == []
