"""Matches cite their place by line (and by page in a PDF), and get_document reads a match
with its neighbours in one call: over real Markdown and PDF files indexed by the pipeline
into either store, through the tools as a client calls them, kept by export and import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import docs
from support.runtime import fake, make_config, running
from support.tools import Tools, refused, refused_by_schema

from pocketmcp.errors import InvalidRequest, NotFound
from pocketmcp.ops import archive
from pocketmcp.plans import Plan
from pocketmcp.runtime import Runtime

# A long note: a front matter, then numbered sections, each naming one rare word.
WORDS = ["albatross", "bergamot", "cormorant", "dulcimer", "euphonium", "flamingo",
         "gazpacho", "harpsichord", "ibis", "jacaranda", "kookaburra", "lorikeet"]


def long_note() -> str:
    parts = ["---\ncreated: 2024-02-01\ntags: [birds]\n---\n# Field notes\n"]
    for n, word in enumerate(WORDS):
        body = " ".join(f"Line {k} of section {n} tells of plain things." for k in range(6))
        parts.append(f"## Section {n}\n\nThe {word} was seen at dawn.\n{body}\n"
                     f"{body}\n\nMore about the morning, with nothing rare in it.\n")
    return "\n".join(parts)


PAGES = [("First page", "Setup of the telescope and its mirror."),
         ("Second page", "The quasar flickered twice behind the nebula."),
         ("Third page", "Packing the lenses away at sunrise.")]


def write_folder(kb: Path) -> None:
    (kb / "notes").mkdir(parents=True, exist_ok=True)
    (kb / "notes" / "field.md").write_text(long_note(), encoding="utf-8")
    (kb / "crlf.md").write_bytes(b"# Windows\r\n\r\nfirst line\r\nsecond line\r\n"
                                 b"the ocelot line\r\nlast line\r\n")
    docs.pdf(kb / "log.pdf", "Observing log", PAGES)


@pytest.fixture(params=["sqlite", "postgres"])
async def folder(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Runtime]:
    config = make_config(tmp_path, {"CHUNK_SIZE": "400"} if request.param == "sqlite" else {
        "CHUNK_SIZE": "400", "STORE": "postgres", "DATABASE_URL": request.getfixturevalue(
            "pg_url"), "PG_SCHEMA": request.getfixturevalue("pg_schema")})
    write_folder(config.watched.root)
    async with running(config, Plan(feed="scan", keep_serving=True),
                       embedding=fake(config)) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(120):
            await rt.pipeline.scan_done.wait()
        yield rt


def file_lines(root: Path, path: str) -> list[str]:
    return (root / path).read_bytes().decode().replace("\r\n", "\n").split("\n")


async def match_for(tools: Tools, word: str) -> dict[str, Any]:
    reply = await tools("search", query=word, mode="keyword", max_per_doc=1, top_k=1)
    assert reply["matches"], (word, reply)
    return dict(reply["matches"][0])


async def chunk_of(tools: Tools, match: dict[str, Any]) -> str:
    """The match's text, cut from its document's at its offsets."""
    whole = await tools("get_document", doc_id=match["doc_id"])
    return str(whole["text"][match["start_off"]:match["end_off"]])


async def test_each_match_names_the_lines_of_its_file_that_hold_it(folder: Runtime) -> None:
    tools, root = Tools(folder), folder.config.watched.root
    lines = file_lines(root, "notes/field.md")
    for word in WORDS:
        m = await match_for(tools, word)
        assert m["path"] == "notes/field.md"
        first, last = m["start_line"], m["end_line"]
        assert 1 <= first <= last <= len(lines), m
        # The rare word's own line lies within the lines cited ...
        at = next(i for i, line in enumerate(lines, 1) if word in line)
        assert first <= at <= last, (word, first, at, last)
        # ... and those lines hold the chunk's text, from its first line to its last.
        chunk = await chunk_of(tools, m)
        cited = "\n".join(lines[first - 1:last])
        assert chunk.strip() in cited, (word, chunk, cited)
        assert cited.startswith(lines[first - 1]) and chunk.split("\n")[0] in lines[first - 1]
        assert (m["page"], m["end_page"]) == (None, None)  # no pages outside a PDF

    # Windows line ends count as one line each.
    m = await match_for(tools, "ocelot")
    assert (m["path"], m["start_line"], m["end_line"]) == ("crlf.md", 1, 6), m


async def test_a_pdf_match_names_its_page(folder: Runtime) -> None:
    tools = Tools(folder)
    for page, word in ((1, "telescope"), (2, "quasar"), (3, "lenses")):
        m = await match_for(tools, word)
        assert m["path"] == "log.pdf"
        assert m["page"] <= page <= m["end_page"], (word, m)
        assert m["start_line"] <= m["end_line"]
    # A passage of one page only: its page exactly.
    doc = await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                      max_tokens=1)
    assert "lenses" in doc["text"]
    assert doc["passage"]["page"] <= 3 == doc["passage"]["end_page"]


async def test_get_document_reads_a_match_with_its_neighbours_within_a_budget(
        folder: Runtime) -> None:
    tools, root = Tools(folder), folder.config.watched.root
    lines = file_lines(root, "notes/field.md")
    m = await match_for(tools, "gazpacho")
    whole = await tools("get_document", doc_id=m["doc_id"])
    assert whole["passage"] is None and whole["text"].startswith("---\n")

    # The chunk alone when the budget holds no more.
    alone = await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                        max_tokens=1)
    chunk = await chunk_of(tools, m)
    p = alone["passage"]
    assert alone["text"] == chunk
    assert (p["first_idx"], p["last_idx"], p["chunk_id"]) == (m["idx"], m["idx"], m["chunk_id"])
    assert (p["start_line"], p["end_line"]) == (m["start_line"], m["end_line"])
    assert (p["start_off"], p["end_off"]) == (m["start_off"], m["end_off"])

    # A budget of several chunks: the chunk with neighbours on both sides, merged in order,
    # within the budget, the text being the file's between the offsets and on the lines said.
    wide = await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                       max_tokens=400)
    p = wide["passage"]
    assert p["first_idx"] < m["idx"] < p["last_idx"], p
    assert p["tokens"] <= 400 and p["tokens"] > alone["passage"]["tokens"]
    assert p["more_before"] and p["more_after"]
    assert chunk in wide["text"]
    assert wide["text"] == whole["text"][p["start_off"]:p["end_off"]]
    cited = "\n".join(lines[p["start_line"] - 1:p["end_line"]])
    assert wide["text"].strip() in cited
    assert p["start_line"] <= m["start_line"] and p["end_line"] >= m["end_line"]

    # A budget larger than the document: all of it, nothing more either side.
    every = await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                        max_tokens=20000)
    p = every["passage"]
    assert (p["first_idx"], p["more_before"], p["more_after"]) == (0, False, False)
    assert p["last_idx"] == whole["chunk_count"] - 1
    assert p["end_line"] == len(lines) - 1  # the file ends with a newline

    # A chunk of another document, or none: a clear error.
    other = await match_for(tools, "ocelot")
    with refused(NotFound, "no chunk"):
        await tools("get_document", doc_id=m["doc_id"], chunk_id=other["chunk_id"])
    with refused(NotFound, "no chunk"):
        await tools("get_document", doc_id=m["doc_id"], chunk_id=10**9)
    for bad, said in ((0, "at least 1"), (20001, "at most 20000")):  # as its schema says
        with refused(InvalidRequest, f"get_document do not fit its schema: max_tokens: {said}"):
            await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                        max_tokens=bad)
    with refused(InvalidRequest, "chunk_id holds 0"):
        await tools("get_document", doc_id=m["doc_id"], chunk_id=0)
    with refused_by_schema("chunk_id"):
        await tools("get_document", doc_id=m["doc_id"], chunk_id="seven")


async def test_lines_and_pages_are_the_same_after_export_and_import(
        folder: Runtime, tmp_path: Path) -> None:
    tools = Tools(folder)
    words = ["gazpacho", "lorikeet", "ocelot", "quasar", "lenses"]
    before = [await match_for(tools, w) for w in words]
    out = tmp_path / "export.jsonl"
    await archive.export(folder.config.main_place(), out)
    (tmp_path / "copy").mkdir()
    config = make_config(tmp_path / "copy")
    async with running(config, embedding=fake(config)) as rt:
        await archive.import_file(rt.writing, out, identity=rt.services.identity)
        after = [await match_for(Tools(rt), w) for w in words]
    keep = ("path", "start_off", "end_off", "start_line", "end_line", "page", "end_page")
    assert [{k: m[k] for k in keep} for m in after] == [{k: m[k] for k in keep}
                                                        for m in before]


async def test_a_passage_of_merged_matches_names_the_lines_of_all_of_it(
        folder: Runtime) -> None:
    tools, root = Tools(folder), folder.config.watched.root
    lines = file_lines(root, "notes/field.md")
    reply = await tools("search", query="plain things morning dawn", mode="keyword",
                        top_k=8, max_per_doc=2)
    merged = [m for m in reply["matches"] if m["merged_idx"]]
    assert merged, reply
    for m in merged:
        # The passage is joined from its chunks (white space between them as one break):
        # its words are the cited lines' words, from the first to the last.
        cited = " ".join(lines[m["start_line"] - 1:m["end_line"]]).split()
        said = m["context"].split()
        assert said[0] in cited[0] and said[-1] in cited[-1], m
        assert " ".join(said) in " ".join(cited), m
        first = await tools("get_document", doc_id=m["doc_id"], chunk_id=m["chunk_id"],
                            max_tokens=1)
        assert m["start_line"] <= first["passage"]["start_line"]
        assert m["end_line"] >= first["passage"]["end_line"]
