"""Turning file bytes into text, and small text facts. Pure functions."""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Sequence

_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Bytes that never occur in text files apart from tab, newline, form feed and carriage return.
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def sha256(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def looks_binary(data: bytes, sample: int = 8192) -> bool:
    """True for content that is not text: NUL bytes or many control bytes near the start."""
    head = data[:sample]
    if not head:
        return False
    for bom, _ in _BOMS:
        if head.startswith(bom):
            return False
    if b"\x00" in head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL))  # one pass over the bytes
    return controls / len(head) > 0.05


def decode(data: bytes) -> tuple[str, bool]:
    """Decode file bytes as text; (text, exact). Undecodable bytes become U+FFFD."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), True
            except UnicodeDecodeError:
                return data.decode(codec, "replace"), False
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace"), False


def clean(text: str) -> str:
    """Normalise line endings and drop NULs, which SQLite text and tokenizers mishandle."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


OCR_MARK = "(OCR)"  # ends the headings OCR's text is put under ("## Page 2 (OCR)")
# The headings conversion writes itself: a page of a PDF read in part by OCR, an image's text.
_OWN_HEADING = re.compile(rf"Page \d+(?: {re.escape(OCR_MARK)})?|Image text {re.escape(OCR_MARK)}")


def title_of(text: str, fallback: str) -> str:
    """The first Markdown heading within the first lines (not one conversion wrote), else
    `fallback`."""
    for match in _HEADING.finditer(text[:4000]):
        heading = match.group(1).strip()
        if not _OWN_HEADING.fullmatch(heading):
            return heading[:200]
    return fallback


def has_pages(external_id: str, source: str, content: str) -> bool:
    """Whether a document's text marks its pages: a converted PDF's ends each page with a
    form feed (watched, ingested or fetched; text given directly never has pages)."""
    return source != "raw" and external_id.lower().endswith(".pdf") and "\f" in content


Place = tuple[int, int, int | None, int | None]  # first line, last line, first page, last


def places(content: str, spans: Sequence[tuple[int, int]], *, pages: bool) -> list[Place]:
    """For each stretch (start, end) of `content` (character offsets, end exclusive): the
    lines (1-based) of its first and its last character that is not white space (of its
    ends when all of it is) and, with `pages`, their pages (form feeds end them; None
    without). One pass over the text, however many stretches."""
    ends = [_inked(content, start, end) for start, end in spans]
    points = sorted({p for pair in ends for p in pair})
    line: dict[int, int] = {}
    page: dict[int, int] = {}
    at, lines, feeds = 0, 1, 1
    for point in points:
        lines += content.count("\n", at, point)
        if pages:
            feeds += content.count("\f", at, point)
        line[point], page[point], at = lines, feeds, point
    return [(line[first], line[last], page[first] if pages else None,
             page[last] if pages else None) for first, last in ends]


def _inked(content: str, start: int, end: int) -> tuple[int, int]:
    """The offsets of the first and the last character of content[start:end] that is not
    white space; its ends when all of it is."""
    text = content[start:end]
    stripped = text.strip()
    if not stripped:
        return start, max(start, end - 1)
    first = start + len(text) - len(text.lstrip())
    return first, first + len(stripped) - 1
