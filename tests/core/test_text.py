from __future__ import annotations

import codecs

import pytest

from pocketmcp.core.paths import PathFilter
from pocketmcp.core.text import clean, decode, looks_binary, title_of


def test_binary_content_is_recognised() -> None:
    assert looks_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert looks_binary(bytes(range(256)) * 4)
    assert not looks_binary("plain text, ünïcode and 日本語\n".encode())
    assert not looks_binary(codecs.BOM_UTF16_LE + "hello".encode("utf-16-le"))


def test_invalid_utf8_is_decoded_with_replacement() -> None:
    text, exact = decode(b"caf\xe9 and more")
    assert not exact
    assert text == "caf\ufffd and more"
    assert decode("café".encode()) == ("café", True)


def test_byte_order_marks_choose_the_codec() -> None:
    assert decode(codecs.BOM_UTF8 + b"hi") == ("hi", True)
    assert decode(codecs.BOM_UTF16_LE + "hé".encode("utf-16-le")) == ("hé", True)


def test_clean_normalises_line_endings_and_drops_nul() -> None:
    assert clean("a\r\nb\rc\x00d") == "a\nb\ncd"


def test_title_is_the_first_heading_or_the_fallback() -> None:
    assert title_of("intro\n\n## Getting started ##\ntext", "x") == "Getting started"
    assert title_of("no heading here", "notes") == "notes"
    # OCR's own headings name no document: an image is titled by its file's name, a scan by
    # its first heading of its own.
    assert title_of("## Image text (OCR)\n\nwifi password rotation", "whiteboard") == (
        "whiteboard")
    assert title_of("## Page 1 (OCR)\n\nx\n\n# Minutes\n", "scan") == "Minutes"
    assert title_of("## Page 2\n\ntext\n", "report") == "report"  # a PDF's text page
    assert title_of("# Receipt (OCR)\n", "r") == "Receipt (OCR)"  # the user's own heading


@pytest.mark.parametrize(
    ("rel", "wanted"),
    [
        ("a.md", True), ("deep/er/b.txt", True), ("c.py", False), (".hidden.md", False),
        ("x/.git/d.md", False), ("~$report.md", False), ("draft.md.tmp", False),
        (".draft.md.swp", False), (".#lock.md", False), ("4913", False), ("notes.md~", False),
        ("node_modules/pkg/README.md", False),
    ],
)
def test_temp_editor_and_hidden_files_are_not_documents(rel: str, wanted: bool) -> None:
    assert PathFilter(["**/*.md", "**/*.txt"]).wants_file(rel) is wanted


def test_ignore_patterns_and_gitignore_apply() -> None:
    paths = PathFilter(["**/*.md"], ignore=["drafts/"], gitignore=["build/", "*.gen.md"])
    assert not paths.wants_file("drafts/a.md")
    assert not paths.wants_file("build/x.md")
    assert not paths.wants_file("docs/api.gen.md")
    assert paths.wants_file("docs/a.md")
    assert not paths.wants_dir("drafts")
