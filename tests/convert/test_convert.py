"""Conversion of each format, and containment of hostile files, with real worker processes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from support import docs

from pocketmcp.convert import kinds
from pocketmcp.convert.pool import Converter, Limits
from pocketmcp.core.text import sha256
from pocketmcp.errors import DocumentError

SECTIONS = [
    ("Installing the telescope", "Mount the tripod on level ground and align the polar axis."),
    ("Cleaning the lenses", "Use a blower brush first, then a microfibre cloth with fluid."),
]


@pytest.fixture
async def converter(processes: dict[str, str]) -> AsyncIterator[Converter]:
    """A pool of conversion worker processes."""
    conv = Converter(Limits(workers=1, timeout_s=30, memory_mb=768,
                            max_unpacked=384 * 2**20))
    try:
        yield conv
    finally:
        await conv.aclose()


async def convert(conv: Converter, path: Path) -> kinds.Converted:
    kind = kinds.kind_of(path.name)
    assert kind is not None
    data = path.read_bytes()
    return await conv.convert(kind, data, path.name, sha256(data))


@pytest.mark.parametrize("maker", [docs.pdf, docs.docx, docs.html, docs.pptx, docs.epub])
async def test_each_format_becomes_text_with_its_title(maker, converter: Converter,
                                                       tmp_path: Path) -> None:
    ext = {"pdf": "pdf", "docx": "docx", "html": "html", "pptx": "pptx", "epub": "epub"}
    path = maker(tmp_path / f"manual.{ext[maker.__name__]}", "Telescope manual", SECTIONS)
    result = await convert(converter, path)
    assert result.title == "Telescope manual"
    flat = " ".join(result.text.split())
    for heading, body in SECTIONS:
        assert heading in flat
        assert body in flat


@pytest.mark.parametrize("maker", [docs.pdf, docs.docx, docs.pptx])
async def test_pdf_and_office_files_give_their_properties(maker, converter: Converter,
                                                          tmp_path: Path) -> None:
    path = maker(tmp_path / f"m.{maker.__name__}", "Telescope manual", SECTIONS)
    props = (await convert(converter, path)).properties
    assert props["title"] == "Telescope manual" and props["author"] == docs.AUTHOR
    assert props["created"] == "2021-06-01T12:30:00.000Z"


@pytest.mark.parametrize("maker", [docs.docx, docs.html, docs.epub])
async def test_structured_formats_keep_headings_as_markdown(maker, converter: Converter,
                                                            tmp_path: Path) -> None:
    path = maker(tmp_path / f"m.{maker.__name__}", "Telescope manual", SECTIONS)
    text = (await convert(converter, path)).text
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert any("Installing the telescope" in h for h in headings), text


async def test_html_boilerplate_is_dropped(converter: Converter, tmp_path: Path) -> None:
    text = (await convert(converter, docs.html(tmp_path / "p.html", "T", SECTIONS))).text
    for noise in ("boilerplate script text", "Cookie settings", "Copyright footer", "color"):
        assert noise not in text


async def test_spreadsheets_and_csv_become_tables(converter: Converter, tmp_path: Path) -> None:
    rows = [["planet", "moons"], ["Mars", "2"], ["Jupiter", "95"]]
    text = (await convert(converter, docs.xlsx(tmp_path / "s.xlsx", "Planets", rows))).text
    assert "## Planets" in text and "| Jupiter | 95 |" in text
    (tmp_path / "s.csv").write_text("planet,moons\nMars,2\nJupiter,95\n")
    text = (await convert(converter, tmp_path / "s.csv")).text
    assert text.splitlines()[0] == "| planet | moons |" and "| Mars | 2 |" in text


async def test_files_that_are_not_what_they_claim_get_clear_errors(
        converter: Converter, tmp_path: Path) -> None:
    cases = {"fake.pdf": b"<html>not a pdf</html>", "fake.docx": b"PK\x03\x04 broken",
             "empty.pdf": b"", "garbage.pptx": os.urandom(4096)}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DocumentError) as caught:
            await convert(converter, tmp_path / name)
        assert caught.value.path == name and caught.value.reason
    # One worker served all of them: refusals do not cost a process.
    assert converter.started == 1
    assert "Mount the tripod" in (await convert(
        converter, docs.pdf(tmp_path / "ok.pdf", "T", SECTIONS))).text


HOSTILE = {
    "zip bomb": (lambda p: docs.zip_bomb_docx(p / "bomb.docx", 600), "zip bomb suspected"),
    "billion laughs": (lambda p: docs.billion_laughs_docx(p / "laughs.docx"), "entities"),
    "PDF decompression bomb": (lambda p: docs.pdf_bomb(p / "bomb.pdf", 1024),
                               "converter stopped"),
    "deeply nested HTML": (lambda p: docs.deep_html(p / "deep.html"), "nested too deeply"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_hostile_files_are_contained(case: str, converter: Converter,
                                           tmp_path: Path) -> None:
    make, reason = HOSTILE[case]
    path = make(tmp_path)
    with anyio.fail_after(60), pytest.raises(DocumentError) as caught:
        await convert(converter, path)
    assert reason in caught.value.reason
    # The converter goes on with the next file.
    ok = await convert(converter, docs.html(tmp_path / "next.html", "Next", SECTIONS))
    assert "Mount the tripod" in ok.text


@pytest.mark.usefixtures("processes")
async def test_a_conversion_over_the_time_limit_is_stopped(tmp_path: Path) -> None:
    # A large page stands in for a file that makes a parser spin: it needs longer than the
    # limit, so its worker is killed and a new one takes the next file.
    big = docs.html(tmp_path / "big.html", "Big", SECTIONS * 20_000)
    conv = Converter(Limits(workers=1, timeout_s=0.5))
    try:
        with anyio.fail_after(30), pytest.raises(DocumentError) as caught:
            await convert(conv, big)
        assert "longer than 0.5 s" in caught.value.reason
        ok = await convert(conv, docs.html(tmp_path / "small.html", "Small", SECTIONS))
        assert "Mount the tripod" in ok.text
        assert conv.started == 2
    finally:
        await conv.aclose()


@pytest.mark.usefixtures("processes")
async def test_a_cancelled_conversion_kills_its_worker(tmp_path: Path) -> None:
    big = docs.html(tmp_path / "big.html", "Big", SECTIONS * 20_000)
    conv = Converter(Limits(workers=1, timeout_s=60))
    with anyio.move_on_after(0.5):
        await convert(conv, big)
    assert conv.started == 1
    assert not conv._idle  # the cancelled worker was not put back
    await conv.aclose()


@pytest.mark.usefixtures("processes")
async def test_idle_workers_exit_and_are_replaced(tmp_path: Path) -> None:
    conv = Converter(Limits(workers=1, idle_s=0.4))
    page = docs.html(tmp_path / "p.html", "P", SECTIONS)
    try:
        await convert(conv, page)
        worker = conv._idle[0]
        with anyio.fail_after(10):
            await worker.process.wait()  # it left by itself after idle_s
        assert "Mount the tripod" in (await convert(conv, page)).text
        assert conv.started == 2
    finally:
        await conv.aclose()


def test_kinds_by_name() -> None:
    assert kinds.kind_of("a/B.PDF") == "pdf"
    assert kinds.kind_of("x.htm") == "html"
    assert kinds.kind_of("notes.md") == kinds.TEXT
    assert kinds.kind_of("script.py") is None
    assert "save it as .docx" in kinds.UNSUPPORTED[".doc"]


@pytest.mark.usefixtures("processes")
async def test_the_ocr_cache_is_keyed_by_the_given_digest_and_skipped_without_a_folder(
        tmp_path: Path) -> None:
    """The bytes are not hashed again: the cache key comes from the SHA-256 the caller has,
    and with no cache folder there is no key at all."""
    path = docs.pdf(tmp_path / "manual.pdf", "Telescope manual", SECTIONS)
    data = path.read_bytes()
    conv = Converter(Limits(workers=1, timeout_s=30, memory_mb=768))
    try:
        assert conv.cache.folder is None

        def no_key(*_: object) -> str:
            raise AssertionError("a cache key was made with no cache folder")

        conv.cache.key = no_key  # type: ignore[method-assign]
        assert (await conv.convert("pdf", data, "manual.pdf", sha256(data))).title == \
            "Telescope manual"
    finally:
        await conv.aclose()

    from pocketmcp.convert.kinds import Converted
    from pocketmcp.convert.limits import OcrLimits

    conv = Converter(Limits(workers=1, timeout_s=30, memory_mb=768,
                            ocr=OcrLimits(cache_dir=tmp_path / "ocr")))
    try:
        if conv.cache.folder is None:
            pytest.skip(f"OCR is off here: {conv.ocr_off}")
        kept = Converted("# Kept\n\nread before", "Kept", 1, {})
        await conv.cache.put(conv.cache.key("pdf", "d" * 64), kept)
        assert await conv.convert("pdf", data, "manual.pdf", "d" * 64) == kept
        assert (await conv.convert("pdf", data, "manual.pdf", sha256(data))).title == \
            "Telescope manual"
    finally:
        await conv.aclose()
