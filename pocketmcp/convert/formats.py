"""The converters: PDF, Word, HTML, PowerPoint, Excel, EPUB and CSV bytes into Markdown.

They run only inside the conversion worker process (`convert.worker`), never in the server: a
hostile file can at worst take that process down. Each converter imports its parser library
on first use (they are heavy: a worker loads only the ones for the formats it meets).
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
import time
import warnings
import zipfile
from collections.abc import Callable, Iterable

from defusedxml import ElementTree

from pocketmcp.convert import ocr as ocr_module
from pocketmcp.convert.kinds import ZIP_KINDS, Converted
from pocketmcp.convert.ocr import OcrRefused, OcrSpec
from pocketmcp.core import dates
from pocketmcp.core.text import OCR_MARK, decode

# Members parsed as XML, and how much of each is read for a DTD (it can only sit in the prolog).
_XML_MEMBERS = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm")
_PROLOG = 65_536


class Refused(Exception):
    """The file cannot be converted; the message says why (shown to the user)."""


# -- limits that hold before any parser runs ------------------------------------------------

def check_zip(data: bytes, max_unpacked: int, max_members: int = 20_000) -> None:
    """Refuse zip containers that would unpack to more than `max_unpacked` bytes or hold
    absurdly many members (zip bombs). Sizes come from the central directory; the worker's
    memory limit catches archives that lie about them."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            if len(members) > max_members:
                raise Refused(f"zip container holds {len(members)} members "
                              f"(limit {max_members})")
            unpacked = sum(m.file_size for m in members)
            if unpacked > max_unpacked:
                raise Refused(f"zip bomb suspected: unpacks to {unpacked // 2**20} MiB "
                              f"(limit {max_unpacked // 2**20} MiB)")
            for member in members:
                if member.filename.lower().endswith(_XML_MEMBERS):
                    with archive.open(member) as stream:
                        prolog = stream.read(_PROLOG)
                    if b"<!ENTITY" in prolog:
                        raise Refused(f"refused: {member.filename} declares XML entities, as "
                                      "entity-expansion bombs (billion laughs) do")
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise Refused(f"not a valid zip container ({exc})") from None


# -- converters --------------------------------------------------------------------------------

def pdf(data: bytes, ocr: OcrSpec | None = None) -> Converted:
    """Text of each page, each ending with a form feed on a line of its own; lines set
    clearly larger than the body text become headings.

    With `ocr`, pages with no text layer that show an image (scanned) are listed in
    `scanned` (at most OcrLimits.max_pages of them), and when `ocr.run` the pages it names
    are read by OCR, each with text under a heading "Page N (OCR)" (every page with text then
    gets a "Page N" heading; a page where nothing was read gives nothing)."""
    import pypdfium2 as pdfium  # heavy: loaded on first use

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise Refused(f"not a readable PDF ({exc})") from None
    try:
        started = time.monotonic()
        ocred = dict(ocr_module.read_pages(document, ocr)) if ocr and ocr.run else {}
        read = {n: found for n, found in ocred.items() if any(x.strip() for x in found)}
        unread = sum(1 for n in ocr.pages if 1 <= n <= len(document)) - len(ocred) if (
            ocr and ocr.run) else 0
        lines: list[tuple[float, str]] = []
        scanned: list[int] = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            page_lines = _sized_lines(textpage)
            if ocr is not None and ocr_module.is_scanned(
                    page, "".join(line for _, line in page_lines)):
                scanned.append(index + 1)
            if index + 1 in read:
                page_lines = [(_KEEP, f"## Page {index + 1} {OCR_MARK}"), (_KEEP, "")] + [
                    (_KEEP, line) for line in read[index + 1]]
            elif read and any(line.strip() for _, line in page_lines):
                page_lines = [(_KEEP, f"## Page {index + 1}"), (_KEEP, ""), *page_lines]
            lines += page_lines
            lines += [(0.0, ""), (_KEEP, _PAGE_END), (0.0, "")]
            textpage.close()
            page.close()
        props = _pdf_properties(document.get_metadata_dict())
        if ocred and ocr:
            props["ocr"] = ocr_module.note_pages(sorted(ocred), len(scanned),
                                                 time.monotonic() - started, ocr.max_pages
                                                 ) + ocr_module.stopped(unread, ocr)
        cap = ocr.max_pages if ocr else 0
        text = _tidy(_with_headings(lines)).replace(_PAGE_END, "")
        return Converted(text, props.get("title"), len(document), props,
                         scanned=tuple(scanned[:cap]), scanned_total=len(scanned),
                         unread=unread)
    finally:
        document.close()


def _sized_lines(textpage: object) -> list[tuple[float, str]]:
    """(largest font size, text) of each line of a page."""
    import pypdfium2.raw as raw  # heavy: loaded on first use

    text = textpage.get_text_range()  # type: ignore[attr-defined]
    count = raw.FPDFText_CountChars(textpage)
    lines: list[tuple[float, str]] = []
    current: list[str] = []
    size = 0.0
    for i, char in enumerate(text[:count]):
        if char == "\n":
            lines.append((size, "".join(current).rstrip("\r")))
            current, size = [], 0.0
            continue
        current.append(char)
        if not char.isspace():
            size = max(size, raw.FPDFText_GetFontSize(textpage, i))
    if current:
        lines.append((size, "".join(current)))
    return lines


_KEEP = -1.0  # the size of lines kept as they are (OCR text, page headings)
# A page's end, a form feed on a line of its own once the text is tidied (a hit's page is
# counted by them): noncharacters until then, which no PDF text holds.
_PAGE_END = "\ufdd0\ufdd1"


def _with_headings(lines: list[tuple[float, str]]) -> str:
    """Markdown: lines whose font is at least 15% larger than the body's (the size holding
    the most characters) are headings, larger sizes ranking higher."""
    weight: dict[float, int] = {}
    for size, line in lines:
        if line.strip() and size != _KEEP:
            weight[round(size, 1)] = weight.get(round(size, 1), 0) + len(line)
    body = max(weight, key=weight.__getitem__) if weight else 0.0
    larger = sorted({round(size, 1) for size, line in lines
                     if line.strip() and size != _KEEP and size >= body * 1.15}, reverse=True)
    level = {size: min(i + 1, 6) for i, size in enumerate(larger)}
    out = []
    for size, line in lines:
        rank = level.get(round(size, 1))
        if rank and line.strip() and len(line) < 200:
            out += ["", "#" * rank + " " + line.strip(), ""]
        else:
            out.append(line)
    return "\n".join(out)


def html_to_markdown(markup: str | bytes) -> Converted:
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning  # heavy: loaded on first use
    from markdownify import MarkdownConverter

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)  # XHTML (EPUB) is fine as HTML
        soup = BeautifulSoup(markup, "lxml")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else None
    for tag in soup(["script", "style", "noscript", "template", "svg", "canvas", "iframe",
                     "object", "embed", "form", "nav", "aside", "footer", "button", "head"]):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    text = MarkdownConverter(heading_style="ATX", bullets="-", strip=["img", "a"],
                             escape_misc=False).convert_soup(root)
    if not title:
        heading = root.find("h1") if hasattr(root, "find") else None
        title = heading.get_text(" ", strip=True) if heading else None
    return Converted(_tidy(text), title or None)


def html(data: bytes) -> Converted:
    return html_to_markdown(data)


def docx(data: bytes) -> Converted:
    """Paragraphs and tables in document order; Heading/Title styles become headings."""
    import docx as python_docx  # heavy: loaded on first use
    from docx.table import Table

    document = python_docx.Document(io.BytesIO(data))
    out = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            out.append(_table([[cell.text for cell in row.cells] for row in block.rows]))
            continue
        text = block.text.strip()
        if not text:
            continue
        style = (block.style.name if block.style is not None else "") or ""
        level = re.match(r"Heading (\d)", style)
        if level:
            out.append("#" * min(int(level.group(1)), 6) + " " + text)
        elif style == "Title":
            out.append("# " + text)
        elif style.startswith("List Number"):
            out.append("1. " + text)
        elif style.startswith("List"):
            out.append("- " + text)
        else:
            out.append(text)
    props = _core_properties(data)
    return Converted("\n\n".join(out), props.get("title"), properties=props)


def pptx(data: bytes) -> Converted:
    from pptx import Presentation  # heavy: loaded on first use

    deck = Presentation(io.BytesIO(data))
    out = []
    for number, slide in enumerate(deck.slides, 1):
        title_shape = slide.shapes.title
        heading = title_shape.text_frame.text.strip() if title_shape is not None else ""
        out.append(f"## Slide {number}" + (f": {heading}" if heading else ""))
        for shape in slide.shapes:
            if shape is title_shape:
                continue
            if shape.has_text_frame and shape.text_frame.text.strip():
                out.append(shape.text_frame.text.strip())
            if getattr(shape, "has_table", False) and shape.has_table:
                rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
                out.append(_table(rows))
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                out.append(f"Notes: {notes}")
    props = _core_properties(data)
    return Converted("\n\n".join(out), props.get("title"), len(deck.slides), props)


def xlsx(data: bytes) -> Converted:
    from openpyxl import load_workbook  # heavy: loaded on first use

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        out = []
        for sheet in book.worksheets:
            rows = [["" if v is None else str(v) for v in row]
                    for row in sheet.iter_rows(values_only=True)]
            rows = [r for r in rows if any(c.strip() for c in r)]
            if rows:
                out.append(f"## {sheet.title}\n\n{_table(rows)}")
        props = _core_properties(data)
        return Converted("\n\n".join(out), props.get("title"), properties=props)
    finally:
        book.close()


def epub(data: bytes) -> Converted:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        container = ElementTree.fromstring(archive.read("META-INF/container.xml"))
        rootfile = next((e.get("full-path") for e in container.iter()
                         if e.tag.endswith("rootfile")), None)
        if not rootfile:
            raise Refused("EPUB without a package document")
        package = ElementTree.fromstring(archive.read(rootfile))
        base = posixpath.dirname(rootfile)
        manifest = {e.get("id"): e.get("href") for e in package.iter()
                    if e.tag.endswith("}item") and e.get("href")}
        spine = [e.get("idref") for e in package.iter() if e.tag.endswith("}itemref")]
        props = _dublin_core(package)
        title = props.get("title")
        parts = []
        for idref in spine:
            href = manifest.get(idref)
            if href:
                member = posixpath.normpath(posixpath.join(base, href.split("#")[0]))
                parts.append(html_to_markdown(archive.read(member)).text)
    return Converted("\n\n".join(p for p in parts if p), title, len(parts), props)


def csv_table(data: bytes) -> Converted:
    text, _ = decode(data)
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192])
    except csv.Error:
        dialect = csv.excel
    rows = [row for row in csv.reader(io.StringIO(text), dialect) if row]
    return Converted(_table(rows) if rows else "")


CONVERTERS: dict[str, Callable[[bytes], Converted]] = {
    "pdf": pdf, "docx": docx, "html": html, "pptx": pptx, "xlsx": xlsx, "epub": epub,
    "csv": csv_table,
}


def convert(kind: str, data: bytes, *, max_unpacked: int,
            ocr: OcrSpec | None = None) -> Converted:
    """Markdown of `data`. Raises Refused for files that are not what they claim to be.

    Images and PDFs take `ocr` (convert.ocr): without `run`, an image only has its limits
    checked and its frames listed in `scanned`, a PDF its scanned pages."""
    try:
        if kind == "image":
            if ocr is None:
                raise Refused(f"text in images needs OCR: {ocr_module.EXTRA_HINT}")
            if not ocr.run:
                pages = ocr_module.image_pages(data, ocr)
                return Converted("", scanned=pages, scanned_total=len(pages))
            return ocr_module.read_image(data, ocr)
        if kind == "pdf":
            return pdf(data, ocr)
    except OcrRefused as exc:
        raise Refused(str(exc)) from None
    converter = CONVERTERS.get(kind)
    if converter is None:
        raise Refused(f"unsupported format {kind!r}")
    if kind in ZIP_KINDS:
        check_zip(data, max_unpacked)
    return converter(data)


# -- helpers -----------------------------------------------------------------------------------

def _cell(value: str) -> str:
    return " ".join(value.replace("|", "\\|").split())


def _table(rows: Iterable[list[str]]) -> str:
    rows = [[_cell(c) for c in row] for row in rows]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return "\n".join(out).strip()


# Dublin Core and OOXML core property names, as the index names them.
_PROPERTY_NAMES = {"title": "title", "creator": "author", "subject": "subject",
                   "keywords": "keywords", "description": "description", "created": "created",
                   "modified": "modified", "date": "created", "lastModifiedBy": "modified_by"}
_DATES = ("created", "modified")


def _dublin_core(root: object) -> dict[str, str]:
    """Document properties from an element tree holding Dublin Core (and OOXML core)
    elements: title, author, subject, keywords, description, created, modified."""
    props: dict[str, str] = {}
    for element in root.iter():  # type: ignore[attr-defined]
        name = _PROPERTY_NAMES.get(str(element.tag).rsplit("}", 1)[-1])
        text = (element.text or "").strip()
        if name is None or not text or name in props:
            continue
        value = dates.normalise(text) if name in _DATES else text[:1000]
        if value:
            props[name] = value
    return props


def _core_properties(data: bytes) -> dict[str, str]:
    """The properties in an Office file's docProps/core.xml, when it has one."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            core = ElementTree.fromstring(archive.read("docProps/core.xml"))
    except (KeyError, zipfile.BadZipFile, ElementTree.ParseError, ValueError):
        return {}
    return _dublin_core(core)


def _pdf_properties(info: dict[str, str]) -> dict[str, str]:
    """A PDF's document information as the index names it."""
    props: dict[str, str] = {}
    for key, name in (("Title", "title"), ("Author", "author"), ("Subject", "subject"),
                      ("Keywords", "keywords"), ("CreationDate", "created"),
                      ("ModDate", "modified")):
        text = (info.get(key) or "").strip()
        value = dates.pdf_date(text) if name in _DATES and text else text[:1000]
        if value:
            props[name] = value
    return props
